package generate

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode"
)

func TestPasswordRules(t *testing.T) {
	pw, err := Password(PasswordParams{})
	if err != nil || len(pw) != DefaultLength {
		t.Fatalf("default password: %q, %v", pw, err)
	}
	for range 50 {
		pw, err := Password(PasswordParams{Length: 4, IncludeSpecial: true})
		if err != nil {
			t.Fatal(err)
		}
		var hasLower, hasUpper, hasDigit, hasSpecial bool
		for _, r := range pw {
			switch {
			case unicode.IsLower(r):
				hasLower = true
			case unicode.IsUpper(r):
				hasUpper = true
			case unicode.IsDigit(r):
				hasDigit = true
			case strings.ContainsRune(special, r):
				hasSpecial = true
			}
		}
		if !hasLower || !hasUpper || !hasDigit || !hasSpecial {
			t.Fatalf("%q lacks a character class", pw)
		}
	}
	pw, _ = Password(PasswordParams{Length: 40, ExcludeLower: true, ExcludeUpper: true})
	if strings.Trim(pw, digits) != "" || len(pw) != 40 {
		t.Fatalf("digits-only password %q", pw)
	}
	if _, err := Password(PasswordParams{ExcludeLower: true, ExcludeUpper: true, ExcludeNumber: true}); err != ErrExcludesAll {
		t.Fatalf("want ErrExcludesAll, got %v", err)
	}
	if p := (PasswordParams{Length: 500}).Normalized(); p.Length != DefaultLength {
		t.Fatalf("length 500 normalized to %d", p.Length)
	}
}

// TestSHA512CryptMatchesOpenSSL checks password_hash against an
// independent implementation.
func TestSHA512CryptMatchesOpenSSL(t *testing.T) {
	openssl := lookPath(t, "openssl", "openssl")
	for _, c := range []struct{ pw, salt string }{
		{"hello", "saltstring"},
		{"a much longer password than sixty-four bytes, to cover the long-input branches of sha-crypt!!", "0123456789abcdef"},
		{"p", "x"},
	} {
		out, err := exec.Command(openssl, "passwd", "-6", "-salt", c.salt, c.pw).Output()
		if err != nil {
			t.Fatal(err)
		}
		if got, want := SHA512Crypt(c.pw, "$6$"+c.salt), strings.TrimSpace(string(out)); got != want {
			t.Errorf("SHA512Crypt(%q, %q) = %s, openssl says %s", c.pw, c.salt, got, want)
		}
	}
	// The known answer of Drepper's specification.
	if got := SHA512Crypt("Hello world!", "$6$saltstring"); got != "$6$saltstring$svn8UoSVapNtMuq1ukKS4tPQd8iKwSMHWjl/O817G3uBnIFNjnQJuesI68u4OTLiBFdcbYEdFCoEOfaS35inz1" {
		t.Errorf("known answer: %s", got)
	}
}

// TestCertificateChainVerifiesWithOpenSSL generates a CA and a leaf signed
// by it, as CredHub would, and has openssl verify the chain.
func TestCertificateChainVerifiesWithOpenSSL(t *testing.T) {
	openssl := lookPath(t, "openssl", "openssl")
	ctx := context.Background()
	caParams := CertParams{CommonName: "test-ca", IsCA: true}
	caParams.Normalize()
	if err := caParams.Validate(); err != nil {
		t.Fatal(err)
	}
	ca, err := Certificate(ctx, caParams, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ca.CA != ca.Certificate {
		t.Fatal("a self-signed CA's ca is itself, as in CredHub")
	}
	signer, err := ParseSigner(ca)
	if err != nil {
		t.Fatal(err)
	}
	leafParams := CertParams{CommonName: "server.example.com", AlternativeNames: []string{"server.example.com", "10.0.0.1", "*.example.com"},
		CA: "/test-ca", ExtendedKeyUsage: []string{"server_auth", "client_auth"}, KeyUsage: []string{"digital_signature", "key_encipherment"},
		KeyLength: 3072, Duration: 30}
	if err := leafParams.Validate(); err != nil {
		t.Fatal(err)
	}
	leafParams.Normalize()
	leaf, err := Certificate(ctx, leafParams, signer)
	if err != nil {
		t.Fatal(err)
	}
	if leaf.CA != ca.Certificate {
		t.Fatal("a signed certificate's ca is its CA's certificate")
	}
	dir := t.TempDir()
	write := func(name, data string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	out, err := exec.Command(openssl, "verify", "-purpose", "sslserver", "-CAfile", write("ca.pem", leaf.CA), write("leaf.pem", leaf.Certificate)).CombinedOutput()
	if err != nil || !strings.Contains(string(out), ": OK") {
		t.Fatalf("openssl verify: %v\n%s", err, out)
	}
	// The private key belongs to the certificate.
	certMod, err := exec.Command(openssl, "x509", "-noout", "-modulus", "-in", filepath.Join(dir, "leaf.pem")).Output()
	if err != nil {
		t.Fatal(err)
	}
	keyMod, err := exec.Command(openssl, "rsa", "-noout", "-modulus", "-in", write("leaf.key", leaf.PrivateKey)).Output()
	if err != nil {
		t.Fatal(err)
	}
	if string(certMod) != string(keyMod) {
		t.Fatal("the private key does not match the certificate")
	}
	cert, err := ParseCertificate(leaf.Certificate)
	if err != nil {
		t.Fatal(err)
	}
	if !ParamsOf(cert, "/test-ca").SameIgnoringDuration(leafParams) {
		t.Fatalf("converge would regenerate an unchanged certificate: %+v vs %+v", ParamsOf(cert, "/test-ca"), leafParams)
	}
}

func TestCertificateValidation(t *testing.T) {
	for _, c := range []struct {
		p    CertParams
		want string
	}{
		{CertParams{IsCA: true}, "At least one subject value"},
		{CertParams{CommonName: "x"}, "You must specify a signing CA"},
		{CertParams{CommonName: "x", CA: "/ca", SelfSign: true}, "'ca' and 'self-sign'"},
		{CertParams{CommonName: "x", IsCA: true, KeyLength: 1024}, "key length"},
		{CertParams{CommonName: "x", IsCA: true, AlternativeNames: []string{"not a name"}}, "alternative name"},
		{CertParams{CommonName: "x", IsCA: true, ExtendedKeyUsage: []string{"bogus"}}, "extended key usage 'bogus'"},
		{CertParams{CommonName: "x", IsCA: true, Duration: 4000}, "Invalid duration"},
		{CertParams{CommonName: "x", IsCA: true, Country: "USA"}, "the country is too long. The max length for country is 2"},
	} {
		err := c.p.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: want %q, got %v", c.p, c.want, err)
		}
	}
}

// TestSSHKeyMatchesSSHKeygen checks the public key and fingerprint with
// ssh-keygen.
func TestSSHKeyMatchesSSHKeygen(t *testing.T) {
	sshKeygen := lookPath(t, "ssh-keygen", "openssh-client")
	v, err := SSH(context.Background(), 2048, "me@example")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	pub := filepath.Join(dir, "id.pub")
	if err := os.WriteFile(pub, []byte(v.PublicKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(sshKeygen, "-lf", pub).CombinedOutput()
	if err != nil {
		t.Fatalf("ssh-keygen -lf: %v\n%s", err, out)
	}
	if want := "2048 SHA256:" + v.PublicKeyFingerprint + " me@example (RSA)"; strings.TrimSpace(string(out)) != want {
		t.Fatalf("ssh-keygen -lf says %q, want %q", out, want)
	}
	// The private key derives the same public key.
	key := filepath.Join(dir, "id")
	if err := os.WriteFile(key, []byte(v.PrivateKey), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err = exec.Command(sshKeygen, "-yf", key).CombinedOutput()
	if err != nil {
		t.Fatalf("ssh-keygen -yf: %v\n%s", err, out)
	}
	if got := strings.Fields(string(out)); len(got) < 2 || got[1] != strings.Fields(v.PublicKey)[1] {
		t.Fatalf("ssh-keygen -yf derives %q from the private key; the public key is %q", out, v.PublicKey)
	}
	if bits, comment := SSHKeyLength(v.PublicKey); bits != 2048 || comment != "me@example" {
		t.Fatalf("SSHKeyLength: %d %q", bits, comment)
	}
}

func TestRSAKey(t *testing.T) {
	openssl := lookPath(t, "openssl", "openssl")
	v, err := RSA(context.Background(), 3072)
	if err != nil {
		t.Fatal(err)
	}
	if RSAKeyLength(v.PublicKey) != 3072 {
		t.Fatal("key length")
	}
	dir := t.TempDir()
	key := filepath.Join(dir, "k")
	if err := os.WriteFile(key, []byte(v.PrivateKey), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(openssl, "rsa", "-in", key, "-pubout").Output()
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != v.PublicKey {
		t.Fatalf("openssl derives\n%s\nfrom the private key; the public key is\n%s", out, v.PublicKey)
	}
}

// lookPath finds an independent tool, skipping the test when the machine
// lacks it (the Debian package names it).
func lookPath(t *testing.T, tool, debianPackage string) string {
	t.Helper()
	p, err := exec.LookPath(tool)
	if err != nil {
		t.Skipf("%s is not installed (Debian package %s); the check against it is skipped", tool, debianPackage)
	}
	return p
}

// Spare keys: made ahead, each handed out once, replaced once no key is
// asked for.
func TestSpareKeys(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go PrepareKeys(ctx, 3)
	spare := SpareCount
	deadline := time.Now().Add(time.Minute)
	for spare() < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("%d spare keys after a minute", spare())
		}
		time.Sleep(10 * time.Millisecond)
	}
	seen := map[string]bool{}
	for range 3 {
		v, err := RSA(ctx, DefaultKeyLength)
		if err != nil {
			t.Fatal(err)
		}
		if RSAKeyLength(v.PublicKey) != DefaultKeyLength || seen[v.PublicKey] {
			t.Fatalf("key of %d bits, seen before: %v", RSAKeyLength(v.PublicKey), seen[v.PublicKey])
		}
		seen[v.PublicKey] = true
	}
	// A 4096-bit key is never a spare one.
	if v, err := RSA(ctx, 4096); err != nil || RSAKeyLength(v.PublicKey) != 4096 {
		t.Fatalf("4096: %v, %d bits", err, RSAKeyLength(v.PublicKey))
	}
	for deadline = time.Now().Add(time.Minute); spare() < 3; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("spare keys not replaced: %d", spare())
		}
	}
}
