package generate

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"runtime"
	"strings"

	"golang.org/x/crypto/ssh"

	"github.com/bosh-injector/bosh-injector/gather/configserver/credhub"
)

// DefaultKeyLength is CredHub's default RSA key length.
const DefaultKeyLength = 2048

// keySlots bounds concurrent RSA key generations to the cores: a burst of
// requests (a first gathering generating ~100 keys) then keeps every core
// busy and none waits behind more work than its share.
var keySlots = make(chan struct{}, runtime.GOMAXPROCS(0))

// rsaKey generates an RSA key of bits, waiting for a free core.
func rsaKey(ctx context.Context, bits int) (*rsa.PrivateKey, error) {
	select {
	case keySlots <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-keySlots }()
	return rsa.GenerateKey(rand.Reader, bits)
}

// ValidKeyLength reports CredHub's INVALID_KEY_LENGTH for lengths other than
// 2048, 3072 and 4096; 0 stands for the default.
func ValidKeyLength(bits int) (int, error) {
	switch bits {
	case 0:
		return DefaultKeyLength, nil
	case 2048, 3072, 4096:
		return bits, nil
	}
	return 0, credhub.Reject(credhub.InvalidKeyLength)
}

// RSAValue is the value of an rsa credential.
type RSAValue struct {
	PublicKey  string `json:"public_key"`
	PrivateKey string `json:"private_key"`
}

// RSA generates an rsa credential: a PKCS#1 private key and a PKIX public
// key, both PEM, as CredHub's CertificateFormatter writes them.
func RSA(ctx context.Context, bits int) (RSAValue, error) {
	key, err := rsaKey(ctx, bits)
	if err != nil {
		return RSAValue{}, err
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return RSAValue{}, err
	}
	return RSAValue{
		PublicKey:  string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub})),
		PrivateKey: privatePEM(key),
	}, nil
}

// SSHValue is the value of an ssh credential.
type SSHValue struct {
	PublicKey            string `json:"public_key"`
	PrivateKey           string `json:"private_key"`
	PublicKeyFingerprint string `json:"public_key_fingerprint"`
}

// SSH generates an ssh credential: an authorized_keys line (with comment,
// when given) and a PKCS#1 private key.
func SSH(ctx context.Context, bits int, comment string) (SSHValue, error) {
	key, err := rsaKey(ctx, bits)
	if err != nil {
		return SSHValue{}, err
	}
	pub, err := ssh.NewPublicKey(&key.PublicKey)
	if err != nil {
		return SSHValue{}, err
	}
	line := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pub)))
	if comment != "" {
		line += " " + comment
	}
	return SSHValue{PublicKey: line, PrivateKey: privatePEM(key), PublicKeyFingerprint: SSHFingerprint(line)}, nil
}

// SSHFingerprint is CredHub's public_key_fingerprint of an authorized_keys
// line: the unpadded base64 SHA-256 of the key blob (ssh-keygen -lf's
// SHA256: form without the prefix); empty when the line does not parse.
func SSHFingerprint(line string) string {
	fields := strings.Fields(line)
	if len(fields) < 2 {
		return ""
	}
	blob, err := base64.StdEncoding.DecodeString(fields[1])
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(blob)
	return base64.RawStdEncoding.EncodeToString(sum[:])
}

// SSHKeyLength is the modulus size of an authorized_keys line's RSA key,
// which converge compares with the requested key_length; 0 if unknown.
func SSHKeyLength(line string) (bits int, comment string) {
	pub, comment, _, _, err := ssh.ParseAuthorizedKey([]byte(line))
	if err != nil {
		return 0, ""
	}
	if ck, ok := pub.(ssh.CryptoPublicKey); ok {
		if rk, ok := ck.CryptoPublicKey().(*rsa.PublicKey); ok {
			return rk.N.BitLen(), comment
		}
	}
	return 0, comment
}

// RSAKeyLength is the modulus size of a PEM public key; 0 if unknown.
func RSAKeyLength(publicPEM string) int {
	block, _ := pem.Decode([]byte(publicPEM))
	if block == nil {
		return 0
	}
	pub, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		return 0
	}
	if rk, ok := pub.(*rsa.PublicKey); ok {
		return rk.N.BitLen()
	}
	return 0
}

func privatePEM(key *rsa.PrivateKey) string {
	return string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}))
}
