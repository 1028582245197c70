// Package auth authenticates the config server's callers, as CredHub does
// with UAA beside it, and stands in for that UAA:
//
//   - Outside callers (a BOSH director, the credhub CLI) get RS256 JWTs from
//     POST /oauth/token with client credentials, shaped and answered as
//     UAA's; the signing key lives in a Secret so every replica signs and
//     verifies with it, and GET /token_keys publishes it as UAA does.
//   - Gathering Jobs present projected ServiceAccount tokens for the
//     server's audience; a TokenReview checks them, and ScopeOf limits the
//     Job to its deployment's names.
//
// A caller's token, a client's secret or a credential value is never
// logged or put in an error.
package auth

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Audience is the aud CredHub's resource server expects in a UAA token.
const Audience = "credhub"

// Scopes CredHub's tokens carry.
const (
	ScopeRead  = "credhub.read"
	ScopeWrite = "credhub.write"
)

// keyLength of the token signing key.
const keyLength = 2048

// LoadKey reads the token signing key from Secret namespace/name (key
// tls.key, PKCS#1 PEM), creating the Secret with a new key when it is
// missing. Create-only, so replicas starting together agree on one key.
func LoadKey(ctx context.Context, c client.Client, namespace, name string) (*rsa.PrivateKey, error) {
	for range 3 {
		var sec corev1.Secret
		err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &sec)
		if err == nil {
			block, _ := pem.Decode(sec.Data[corev1.TLSPrivateKeyKey])
			if block == nil {
				return nil, fmt.Errorf("secret %s/%s: no PEM key under %s", namespace, name, corev1.TLSPrivateKeyKey)
			}
			return x509.ParsePKCS1PrivateKey(block.Bytes)
		}
		if !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("reading the token signing key: %w", err)
		}
		key, err := rsa.GenerateKey(rand.Reader, keyLength)
		if err != nil {
			return nil, err
		}
		immutable := true
		err = c.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
			Immutable:  &immutable,
			Data: map[string][]byte{corev1.TLSPrivateKeyKey: pem.EncodeToMemory(&pem.Block{
				Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})},
		})
		if err == nil {
			return key, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("storing the token signing key: %w", err)
		}
	}
	return nil, errors.New("the token signing key Secret keeps changing")
}

// Issuer issues and verifies UAA-shaped access tokens.
type Issuer struct {
	key *rsa.PrivateKey
	kid string
	// TTL is how long a token is valid.
	TTL time.Duration
}

// NewIssuer signs with key; the key id is derived from the public key, so
// every replica names it alike.
func NewIssuer(key *rsa.PrivateKey) *Issuer {
	der, _ := x509.MarshalPKIXPublicKey(&key.PublicKey)
	sum := sha256.Sum256(der)
	return &Issuer{key: key, kid: "bosh-injector-" + hex.EncodeToString(sum[:8]), TTL: time.Hour}
}

// KeyID is the kid of the issuer's tokens.
func (i *Issuer) KeyID() string { return i.kid }

// Claims are a UAA client_credentials token's claims.
type Claims struct {
	jwt.RegisteredClaims
	ClientID    string   `json:"client_id"`
	CID         string   `json:"cid"`
	AZP         string   `json:"azp"`
	GrantType   string   `json:"grant_type"`
	Scope       []string `json:"scope"`
	Authorities []string `json:"authorities"`
	ZID         string   `json:"zid"`
	RevSig      string   `json:"rev_sig,omitempty"`
}

// Issue returns a signed token for client with scopes; iss is UAA's
// "<url>/oauth/token".
func (i *Issuer) Issue(clientName string, scopes []string, url string) (token string, claims *Claims, err error) {
	now := time.Now()
	claims = &Claims{
		RegisteredClaims: jwt.RegisteredClaims{
			ID:        uuid.NewString(),
			Subject:   clientName,
			Issuer:    url + "/oauth/token",
			Audience:  jwt.ClaimStrings{Audience, clientName},
			IssuedAt:  jwt.NewNumericDate(now),
			ExpiresAt: jwt.NewNumericDate(now.Add(i.TTL)),
		},
		ClientID: clientName, CID: clientName, AZP: clientName,
		GrantType: "client_credentials", Scope: scopes, Authorities: scopes, ZID: "uaa",
	}
	t := jwt.NewWithClaims(jwt.SigningMethodRS256, claims)
	t.Header["kid"] = i.kid
	token, err = t.SignedString(i.key)
	return token, claims, err
}

// Token verification failures.
var (
	ErrExpired   = errors.New("token expired")
	ErrSignature = errors.New("token signature invalid")
	ErrMalformed = errors.New("token malformed")
)

// Verify checks a token's signature, expiry and audience; the error is one
// of ErrExpired, ErrSignature and ErrMalformed.
func (i *Issuer) Verify(token string) (*Claims, error) {
	var claims Claims
	_, err := jwt.ParseWithClaims(token, &claims, func(*jwt.Token) (any, error) { return &i.key.PublicKey, nil },
		jwt.WithValidMethods([]string{jwt.SigningMethodRS256.Alg()}), jwt.WithAudience(Audience),
		jwt.WithExpirationRequired(), jwt.WithIssuedAt())
	switch {
	case err == nil:
		return &claims, nil
	case errors.Is(err, jwt.ErrTokenExpired):
		return nil, ErrExpired
	case errors.Is(err, jwt.ErrTokenMalformed):
		return nil, ErrMalformed
	default:
		return nil, ErrSignature
	}
}

// Ours reports whether token names this issuer's key, so it is verified
// here rather than by a TokenReview. Nothing is verified yet.
func (i *Issuer) Ours(token string) bool {
	t, _, err := jwt.NewParser().ParseUnverified(token, jwt.MapClaims{})
	if err != nil {
		return false
	}
	kid, _ := t.Header["kid"].(string)
	return kid == i.kid
}

// JWK is a key as UAA's /token_key and /token_keys show it.
type JWK struct {
	KTY   string `json:"kty"`
	E     string `json:"e"`
	Use   string `json:"use"`
	KID   string `json:"kid"`
	Alg   string `json:"alg"`
	Value string `json:"value"`
	N     string `json:"n"`
}

// JWK is the issuer's public key.
func (i *Issuer) JWK() JWK {
	der, _ := x509.MarshalPKIXPublicKey(&i.key.PublicKey)
	return JWK{
		KTY: "RSA", Use: "sig", KID: i.kid, Alg: jwt.SigningMethodRS256.Alg(),
		E:     base64.RawURLEncoding.EncodeToString(big.NewInt(int64(i.key.PublicKey.E)).Bytes()),
		N:     base64.RawURLEncoding.EncodeToString(i.key.PublicKey.N.Bytes()),
		Value: string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})),
	}
}

// JWKS is the body of /token_keys.
func (i *Issuer) JWKS() []byte {
	b, _ := json.Marshal(map[string][]JWK{"keys": {i.JWK()}})
	return b
}
