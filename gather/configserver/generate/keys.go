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
	"sync/atomic"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/bosh-injector/bosh-injector/gather/configserver/credhub"
)

// DefaultKeyLength is CredHub's default RSA key length.
const DefaultKeyLength = 2048

// keySlots bounds concurrent RSA key generations to the cores: a burst of
// requests (a first gathering generating ~100 keys) then keeps every core
// busy and none waits behind more work than its share.
var keySlots = make(chan struct{}, runtime.GOMAXPROCS(0))

// spareKeys, once PrepareKeys runs, holds default-length keys generated
// ahead; each is handed out once and kept nowhere else.
var spareKeys atomic.Pointer[chan *rsa.PrivateKey]

// asked is when a key was last asked for (Unix nanoseconds).
var asked atomic.Int64

// refillQuiet is how long no key is asked for before PrepareKeys replaces
// the keys handed out: replacing them at once would take a core from the
// burst of requests that took them (a gathering's), which it should have.
const refillQuiet = time.Second

// rsaKey is an RSA key of bits: a spare one when there is one, else one
// generated now.
func rsaKey(ctx context.Context, bits int) (*rsa.PrivateKey, error) {
	asked.Store(time.Now().UnixNano())
	if spare := spareKeys.Load(); spare != nil && bits == DefaultKeyLength {
		select {
		case key := <-*spare:
			return key, nil
		default:
		}
	}
	return newKey(ctx, bits)
}

// newKey generates an RSA key of bits, waiting for a free core.
func newKey(ctx context.Context, bits int) (*rsa.PrivateKey, error) {
	select {
	case keySlots <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-keySlots }()
	return rsa.GenerateKey(rand.Reader, bits)
}

// SpareCount is how many keys are ready ahead.
func SpareCount() int {
	if spare := spareKeys.Load(); spare != nil {
		return len(*spare)
	}
	return 0
}

// PrepareKeys keeps n default-length keys generated ahead, one at a time
// while no key is asked for, replacing those handed out, until ctx ends.
// A first gathering of
// cf-deployment asks for about a hundred keys at once; generating them is
// most of its time (seconds on two cores), which keys made while the
// server idles save.
func PrepareKeys(ctx context.Context, n int) {
	if n <= 0 {
		return
	}
	spare := make(chan *rsa.PrivateKey, n)
	spareKeys.Store(&spare)
	for {
		if wait := refillQuiet - time.Since(time.Unix(0, asked.Load())); wait > 0 {
			select {
			case <-time.After(wait):
				continue
			case <-ctx.Done():
				return
			}
		}
		key, err := newKey(ctx, DefaultKeyLength)
		if err != nil {
			return
		}
		select {
		case spare <- key:
		case <-ctx.Done():
			return
		}
	}
}

// TakesKey says whether generating a credential of type typ takes an RSA
// key, which a spare one can be.
func TakesKey(typ string) bool {
	return typ == "certificate" || typ == "rsa" || typ == "ssh"
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
