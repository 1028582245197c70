package variables

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bosh-injector/bosh-injector/gather/model/manifest"
	"github.com/bosh-injector/bosh-injector/gather/model/yamlvalue"
)

func mustParse(t *testing.T, s string) any {
	t.Helper()
	v, err := yamlvalue.Parse([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func t39Source(t *testing.T) Source {
	return NewMapSource(mustParse(t, `{port: 8443, tls: {ca: A, certificate: C, private_key: K}, rate: 1.0, big: 12345678901234567890}`).(*yamlvalue.Map))
}

// T39 (a)-(e).
func TestInterpolateT39(t *testing.T) {
	tests := []struct{ in, want, err string }{
		{`{port: ((port))}`, `{"port":8443}`, ""},
		{`{url: "https://h:((port))/"}`, `{"url":"https://h:8443/"}`, ""},
		{`{cert: ((tls))}`, `{"cert":{"ca":"A","certificate":"C","private_key":"K"}}`, ""},
		{`{ca: ((tls.ca))}`, `{"ca":"A"}`, ""},
		{`{s: "x-((tls))"}`, "", "- Failed to substitute variable: Can not replace '((tls))' in 'x-((tls))'. The value should be a String or an Integer."},
		{`{a: ((!port)), b: (( port ))}`, `{"a":8443,"b":8443}`, ""},
		{`{((port)): x}`, `{"8443":"x"}`, ""},
		{`{a: [((tls.certificate)), "((tls.ca))((tls.private_key))"]}`, `{"a":["C","AK"]}`, ""},
		{`{a: ((tls.zz))}`, "", "- Failed to fetch variable 'tls' from config server: Expected parent 'tls' hash to have key 'zz'"},
		{`{a: ((tls.ca.x))}`, "", "- Failed to fetch variable 'tls' from config server: Expected parent 'tls.ca' to be a hash"},
		// Values keep their Ruby class: the Float 1.0, a Bignum (an
		// Integer, so it may stand inside a string).
		{`{r: ((rate)), b: ((big)), s: "n-((big))", ((big)): x}`, `{"r":1.0,"b":12345678901234567890,"s":"n-12345678901234567890","12345678901234567890":"x"}`, ""},
		{`{s: "r-((rate))"}`, "", "- Failed to substitute variable: Can not replace '((rate))' in 'r-((rate))'. The value should be a String or an Integer."},
		{`{a: ((nope)), b: ((nope)), c: ((other))}`, "", "- Failed to find variable 'nope' from config server\n- Failed to find variable 'other' from config server"},
	}
	for _, tc := range tests {
		got, err := Interpolate(mustParse(t, tc.in), t39Source(t))
		if tc.err != "" {
			if err == nil || err.Error() != tc.err {
				t.Errorf("%s: error = %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.in, err)
			continue
		}
		js, _ := json.Marshal(got)
		if string(js) != tc.want {
			t.Errorf("%s: got %s, want %s", tc.in, js, tc.want)
		}
	}
}

func TestInterpolateDoesNotShareValues(t *testing.T) {
	src := t39Source(t)
	got, err := Interpolate(mustParse(t, `{a: ((tls)), b: ((tls))}`), src)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := got.(*yamlvalue.Map).Get("a")
	a.(*yamlvalue.Map).Set("ca", "changed")
	b, _ := got.(*yamlvalue.Map).Get("b")
	if v, _ := b.(*yamlvalue.Map).Get("ca"); v != "A" {
		t.Fatalf("values share storage: %v", v)
	}
}

func TestPlaceholders(t *testing.T) {
	got := Placeholders(mustParse(t, `{a: ((x.ca)), b: ["((y)) ((!x))"], ((z)): 1}`))
	if strings.Join(got, ",") != "x,y,z" {
		t.Fatalf("got %v", got)
	}
}

func defs(t *testing.T, s string) []manifest.Variable {
	m, err := manifest.Parse([]byte("name: d\nvariables: " + s))
	if err != nil {
		t.Fatal(err)
	}
	return m.Variables
}

func TestGenerate(t *testing.T) {
	src := NewMapSource(nil)
	src.Put("kept", "existing")
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	err := Generate(defs(t, `
- {name: kept, type: password}
- {name: pw, type: password}
- {name: short, type: password, options: {length: 8}}
- {name: tls, type: certificate, options: {ca: ca, common_name: web.example, alternative_names: [a.example, 10.0.0.1], extended_key_usage: [server_auth, client_auth], duration: 30}}
- {name: ca, type: certificate, options: {is_ca: true, common_name: my-ca}}
- {name: key, type: rsa}
- {name: sshkey, type: ssh}
`), src, now)
	if err != nil {
		t.Fatal(err)
	}
	get := func(n string) any { v, _, _ := src.Get(n); return v }
	if get("kept") != "existing" {
		t.Error("existing value regenerated")
	}
	if pw := get("pw").(string); !regexp.MustCompile(`^[a-z0-9]{20}$`).MatchString(pw) {
		t.Errorf("password %q", pw)
	}
	if len(get("short").(string)) != 8 {
		t.Error("length ignored")
	}
	tls := get("tls").(*yamlvalue.Map)
	ca := get("ca").(*yamlvalue.Map)
	caPEM, _ := ca.Get("certificate")
	tlsCA, _ := tls.Get("ca")
	if tlsCA != caPEM {
		t.Error("tls.ca is not the CA's certificate")
	}
	certPEM, _ := tls.Get("certificate")
	cert := parseCert(t, certPEM.(string))
	caCert := parseCert(t, caPEM.(string))
	if err := cert.CheckSignatureFrom(caCert); err != nil {
		t.Errorf("not signed by the CA: %v", err)
	}
	if cert.Subject.CommonName != "web.example" || len(cert.DNSNames) != 1 || cert.DNSNames[0] != "a.example" || len(cert.IPAddresses) != 1 {
		t.Errorf("subject/SANs: %v %v %v", cert.Subject, cert.DNSNames, cert.IPAddresses)
	}
	if len(cert.ExtKeyUsage) != 2 || cert.IsCA || !caCert.IsCA {
		t.Errorf("usages %v isCA %v/%v", cert.ExtKeyUsage, cert.IsCA, caCert.IsCA)
	}
	if d := cert.NotAfter.Sub(now); d != 30*24*time.Hour {
		t.Errorf("duration %v", d)
	}
	ssh := get("sshkey").(*yamlvalue.Map)
	pub, _ := ssh.Get("public_key")
	fp, _ := ssh.Get("public_key_fingerprint")
	if !strings.HasPrefix(pub.(string), "ssh-rsa ") || !regexp.MustCompile(`^([0-9a-f]{2}:){15}[0-9a-f]{2}$`).MatchString(fp.(string)) {
		t.Errorf("ssh %v %v", pub, fp)
	}
	rsaKey := get("key").(*yamlvalue.Map)
	if k, _ := rsaKey.Get("public_key"); !strings.Contains(k.(string), "BEGIN PUBLIC KEY") {
		t.Error("rsa public key")
	}

	// A second run changes nothing.
	before, _ := json.Marshal(src.Values())
	if err := Generate(defs(t, `[{name: pw, type: password}, {name: tls, type: certificate, options: {ca: ca, common_name: x}}]`), src, now); err != nil {
		t.Fatal(err)
	}
	after, _ := json.Marshal(src.Values())
	if string(before) != string(after) {
		t.Error("values regenerated")
	}
}

func parseCert(t *testing.T, s string) *x509.Certificate {
	t.Helper()
	b, _ := pem.Decode([]byte(s))
	if b == nil {
		t.Fatalf("no PEM in %q", s)
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestGenerateErrors(t *testing.T) {
	tests := []struct{ defs, err string }{
		{`[{name: x, type: user}]`, "variable 'x': unsupported type 'user' (supported: password, certificate, rsa, ssh)"},
		{`[{name: c, type: certificate, options: {ca: missing, common_name: x}}]`, "variable 'missing' is neither set nor defined in the manifest's variables"},
		{`[{name: c, type: certificate, options: {ca: c, common_name: x}}]`, "variable 'c': its certificate authority chain refers back to itself"},
		{`[{name: c, type: certificate, options: {ca: p, common_name: x}}, {name: p, type: password}]`, "variable 'c': CA 'p' is not a certificate variable"},
	}
	for _, tc := range tests {
		err := Generate(defs(t, tc.defs), NewMapSource(nil), time.Now())
		if err == nil || err.Error() != tc.err {
			t.Errorf("%s: error = %v, want %q", tc.defs, err, tc.err)
		}
	}
}

// An unknown type is refused even when the value exists, as the director
// refuses the manifest whatever the config server holds.
func TestUnknownTypeWithValue(t *testing.T) {
	src := NewMapSource(nil)
	if err := src.Put("x", "given"); err != nil {
		t.Fatal(err)
	}
	err := Generate(defs(t, `[{name: x, type: user}]`), src, time.Now())
	if err == nil || err.Error() != "variable 'x': unsupported type 'user' (supported: password, certificate, rsa, ssh)" {
		t.Errorf("error = %v", err)
	}
}

// TestFileSource: generated values reach the file at Save, in one write,
// mode 0600 even over a 0644 store; 30000 passwords take well under a
// second of writing.
func TestFileSource(t *testing.T) {
	path := filepath.Join(t.TempDir(), "vars.yml")
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := OpenFile(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	if err := Generate(defs(t, `[{name: b, type: password}, {name: a, type: password}]`), s, time.Now()); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(path); len(data) != 0 {
		t.Fatalf("written before Save: %q", data)
	}
	if err := s.Save(); err != nil {
		t.Fatal(err)
	}
	if info, err := os.Stat(path); err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("store mode %v (%v), want 0600", info.Mode(), err)
	}
	data, _ := os.ReadFile(path)
	if !regexp.MustCompile(`^b: [a-z0-9]{20}\na: [a-z0-9]{20}\n$`).Match(data) {
		t.Fatalf("store %q", data)
	}
	again, err := OpenFile(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	v1, _, _ := s.Get("a")
	v2, _, _ := again.Get("a")
	if v1 != v2 {
		t.Fatal("store does not read back")
	}
}

// TestFileSourceManyPasswords: 30000 passwords are generated with the
// store untouched until the one Save (rewriting it at each, as before,
// took minutes).
func TestFileSourceManyPasswords(t *testing.T) {
	path := filepath.Join(t.TempDir(), "vars.yml")
	s, err := OpenFile(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	vars := make([]manifest.Variable, 30000)
	for i := range vars {
		vars[i] = manifest.Variable{Name: fmt.Sprintf("p%d", i), Type: "password"}
	}
	start := time.Now()
	if err := Generate(vars, s, time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err == nil {
		t.Fatal("the store was written before Save")
	}
	if err := s.Save(); err != nil {
		t.Fatal(err)
	}
	// Generous for a loaded machine; the quadratic rewrite took minutes.
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("30000 passwords took %v", took)
	}
}

// TestInterpolateBounded: 2000 references to a 1 MiB value in one string,
// or 600 to a list of 200k items, are refused without building them.
func TestInterpolateBounded(t *testing.T) {
	items := make([]any, 200000)
	for i := range items {
		items[i] = "x"
	}
	src := NewMapSource(nil)
	_ = src.Put("s", strings.Repeat("a", 1<<20))
	_ = src.Put("l", items)
	list := make([]any, 600)
	for i := range list {
		list[i] = "((l))"
	}
	for name, doc := range map[string]any{"s": strings.Repeat("((s))", 2000), "l": list} {
		_, err := Interpolate(doc, src)
		if err == nil || !strings.Contains(err.Error(), "'(("+name+"))'") || !strings.Contains(err.Error(), "128 MiB") {
			t.Errorf("%s: error %v", name, err)
		}
	}
}

// TestRedact: a value, its quoted form and the lines of a multi-line value
// are redacted from text; short values stay.
func TestRedact(t *testing.T) {
	var r Redactor
	key := "-----BEGIN KEY-----\nMIIEowIBAAKCAQEAx1\n-----END KEY-----\n"
	r.Remember(yamlvalue.NewMap())
	src := r.Watch(NewMapSource(nil))
	_ = src.Put("c", key)
	r.Remember([]any{"z1", "a-long-password"})
	for in, want := range map[string]string{
		"name " + strconv.Quote(key):          `name "<redacted>"`,
		"line MIIEowIBAAKCAQEAx1 of it":       "line <redacted> of it",
		"az z1 and a-long-password, z1 again": "az z1 and <redacted>, z1 again",
	} {
		if got := r.Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestFileSourceTooLarge: a store that could not be read back is not
// written; the previous one stays.
func TestFileSourceTooLarge(t *testing.T) {
	path := filepath.Join(t.TempDir(), "vars.yml")
	if err := os.WriteFile(path, []byte("a: b\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := OpenFile(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	_ = s.Put("big", strings.Repeat("x", 17<<20))
	if err := s.Save(); err == nil || !strings.Contains(err.Error(), "can be read back") {
		t.Errorf("error %v", err)
	}
	if data, _ := os.ReadFile(path); string(data) != "a: b\n" {
		t.Errorf("store now %d bytes", len(data))
	}
}
