package variables

import (
	"cmp"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha1"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"slices"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/sync/errgroup"

	"github.com/bosh-injector/bosh-injector/gather/model/manifest"
	"github.com/bosh-injector/bosh-injector/gather/model/yamlvalue"
)

// keyBits is the RSA key size the BOSH CLI generates.
const keyBits = 2048

// Generate makes sure every variable defined in the manifest has a value in
// src: values that exist are never regenerated; a certificate's signing CA
// is generated first when it is itself a manifest variable. now is the
// certificates' start of validity. Certificates consuming links are left
// for GenerateWithLinks.
func Generate(defs []manifest.Variable, src Source, now time.Time) error {
	return GenerateWithLinks(defs, src, now, nil, false)
}

// LinkAddress returns the group address of the link provider a
// certificate's `consumes` names with `from`.
type LinkAddress func(from string) (string, error)

// GenerateWithLinks is Generate for certificates consuming links too: each
// `consumes` entry (`alternative_name` or `common_name`, `{from: <provider>,
// properties: {wildcard: true}}`) puts the provider group's address, or
// `*.<address>`, into the certificate. With a nil address they are skipped.
// A Generating source generates the values itself; converge
// (features.converge_variables) is then the mode of variables without an
// update_mode.
func GenerateWithLinks(defs []manifest.Variable, src Source, now time.Time, address LinkAddress, converge bool) error {
	if gen, ok := src.(Generating); ok {
		return generateOn(gen, defs, address, converge)
	}
	g := generator{defs: map[string]manifest.Variable{}, src: src, now: now, busy: map[string]bool{}, address: address}
	for _, d := range defs {
		g.defs[d.Name] = d
		// An unknown type is an error even when the variable's value
		// exists: the director would refuse the manifest.
		if err := supported(d); err != nil {
			return err
		}
	}
	for _, d := range defs {
		if err := g.ensure(d.Name); err != nil {
			return err
		}
	}
	return nil
}

// caCycle is the error of a certificate whose CA chain leads back to it.
func caCycle(name string) error {
	return &namedError{fmt.Errorf("variable '%s': its certificate authority chain refers back to itself", name)}
}

// namedError already names the variable it is about, so callers up the CA
// chain pass it on unchanged.
type namedError struct{ error }

func (e *namedError) Unwrap() error { return e.error }

type generator struct {
	defs    map[string]manifest.Variable
	src     Source
	now     time.Time
	busy    map[string]bool
	address LinkAddress
}

func (g *generator) ensure(name string) error {
	v, found, err := g.src.Get(name)
	if err != nil {
		return err
	}
	if found {
		return g.followCA(name, v)
	}
	d, ok := g.defs[name]
	if !ok {
		return &namedError{fmt.Errorf("variable '%s' is neither set nor defined in the manifest's variables", name)}
	}
	if d.Consumes != nil && g.address == nil {
		return nil
	}
	if g.busy[name] {
		return caCycle(name)
	}
	g.busy[name] = true
	defer delete(g.busy, name)
	switch d.Type {
	case "password":
		v, err = password(d.Options)
	case "certificate":
		v, err = g.certificate(d)
	case "rsa":
		v, err = rsaKey()
	case "ssh":
		v, err = sshKey()
	default:
		return supported(d)
	}
	if err != nil {
		var named *namedError
		if errors.As(err, &named) {
			return err
		}
		return &namedError{fmt.Errorf("variable '%s': %w", name, err)}
	}
	return g.src.Put(name, v)
}

// variableTypes are the types gathering generates.
var variableTypes = []string{"password", "certificate", "rsa", "ssh"}

func supported(d manifest.Variable) error {
	if slices.Contains(variableTypes, d.Type) {
		return nil
	}
	return fmt.Errorf("variable '%s': unsupported type '%s' (supported: %s)", d.Name, d.Type, strings.Join(variableTypes, ", "))
}

// followCA signs a generated certificate again when its CA is not the one
// that signed it (the CA's Secret was deleted and regenerated), so that
// deleting a CA rotates it and its leaves. User-provided values are kept.
func (g *generator) followCA(name string, v any) error {
	d, ok := g.defs[name]
	r, renewing := g.src.(Renewing)
	caName, _ := option(d.Options, "ca").(string)
	if !ok || !renewing || d.Type != "certificate" || caName == "" || !r.Generated(name) || (d.Consumes != nil && g.address == nil) {
		return nil
	}
	if err := g.ensure(caName); err != nil {
		return err
	}
	_, _, caPEM, err := g.loadCA(caName)
	if err != nil {
		return &namedError{fmt.Errorf("variable '%s': %w", name, err)}
	}
	m, _ := v.(*yamlvalue.Map)
	if signedBy, _ := m.Get("ca"); signedBy == caPEM {
		return nil
	}
	cert, err := g.certificate(d)
	if err != nil {
		return &namedError{fmt.Errorf("variable '%s': %w", name, err)}
	}
	return r.Replace(name, cert)
}

func option(opts *yamlvalue.Map, key string) any {
	v, _ := opts.Get(key)
	return v
}

// Bounds on generation options: a password of a billion characters took
// gigabytes and minutes, and days beyond time.Duration's range would wrap
// the certificate's end before its start.
const (
	MaxPasswordLength  = 4096
	MaxCertificateDays = 100000
)

const passwordChars = "abcdefghijklmnopqrstuvwxyz0123456789"

// password is a string of [a-z0-9], 20 characters unless `length` is set.
func password(opts *yamlvalue.Map) (string, error) {
	length := int64(20)
	if l := option(opts, "length"); l != nil {
		n, ok := l.(int64)
		if !ok || n <= 0 {
			return "", fmt.Errorf("option 'length' must be a positive integer")
		}
		if n > MaxPasswordLength {
			return "", fmt.Errorf("option 'length' %d is more than the %d characters a password may have", n, MaxPasswordLength)
		}
		length = n
	}
	b := make([]byte, length)
	max := big.NewInt(int64(len(passwordChars)))
	for i := range b {
		n, err := rand.Int(rand.Reader, max)
		if err != nil {
			return "", err
		}
		b[i] = passwordChars[n.Int64()]
	}
	return string(b), nil
}

func pemKey(k *rsa.PrivateKey) string {
	return string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)}))
}

func rsaKey() (*yamlvalue.Map, error) {
	k, err := rsa.GenerateKey(rand.Reader, keyBits)
	if err != nil {
		return nil, err
	}
	pub, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil {
		return nil, err
	}
	m := yamlvalue.NewMap()
	m.Set("private_key", pemKey(k))
	m.Set("public_key", string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub})))
	return m, nil
}

func sshKey() (*yamlvalue.Map, error) {
	k, err := rsa.GenerateKey(rand.Reader, keyBits)
	if err != nil {
		return nil, err
	}
	pub, err := ssh.NewPublicKey(&k.PublicKey)
	if err != nil {
		return nil, err
	}
	m := yamlvalue.NewMap()
	m.Set("private_key", pemKey(k))
	m.Set("public_key", strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pub))))
	// The CLI's fingerprint is the legacy MD5 form.
	m.Set("public_key_fingerprint", ssh.FingerprintLegacyMD5(pub))
	return m, nil
}

func stringList(opts *yamlvalue.Map, key string) ([]string, error) {
	v := option(opts, key)
	if v == nil {
		return nil, nil
	}
	list, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("option '%s' must be a list of strings", key)
	}
	out := make([]string, len(list))
	for i, e := range list {
		s, ok := e.(string)
		if !ok {
			return nil, fmt.Errorf("option '%s' must be a list of strings", key)
		}
		out[i] = s
	}
	return out, nil
}

// certificate generates {ca, certificate, private_key}, self-signed for a
// CA without `ca`, else signed by the named CA variable.
func (g *generator) certificate(d manifest.Variable) (*yamlvalue.Map, error) {
	opts := d.Options
	cn, _ := option(opts, "common_name").(string)
	isCA, _ := option(opts, "is_ca").(bool)
	caName, _ := option(opts, "ca").(string)
	sans, err := stringList(opts, "alternative_names")
	if err != nil {
		return nil, err
	}
	for _, kind := range d.Consumes.Keys() {
		addr, err := g.linkAddress(d.Consumes, kind)
		if err != nil {
			return nil, err
		}
		switch kind {
		case "alternative_name":
			sans = append(sans, addr)
		case "common_name":
			cn = addr
		}
	}
	if cn == "" && !isCA {
		return nil, fmt.Errorf("option 'common_name' is required")
	}
	days := int64(365)
	if v := option(opts, "duration"); v != nil {
		n, ok := v.(int64)
		if !ok || n <= 0 {
			return nil, fmt.Errorf("option 'duration' must be a positive number of days")
		}
		if n > MaxCertificateDays {
			return nil, fmt.Errorf("option 'duration' %d is more than the %d days a certificate may last", n, MaxCertificateDays)
		}
		days = n
	}
	orgs, err := stringList(opts, "organization")
	if err != nil {
		if s, ok := option(opts, "organization").(string); ok {
			orgs, err = []string{s}, nil
		} else {
			return nil, err
		}
	}
	ekus, err := stringList(opts, "extended_key_usage")
	if err != nil {
		return nil, err
	}
	if len(orgs) == 0 {
		orgs = []string{"Cloud Foundry"}
	}
	key, err := rsa.GenerateKey(rand.Reader, keyBits)
	if err != nil {
		return nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: cn, Organization: orgs, Country: []string{"USA"}},
		NotBefore:             g.now.Add(-time.Minute),
		NotAfter:              g.now.Add(time.Duration(days) * 24 * time.Hour),
		BasicConstraintsValid: true,
		IsCA:                  isCA,
		SubjectKeyId:          keyID(&key.PublicKey),
	}
	if isCA {
		tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageCRLSign
	} else {
		tmpl.KeyUsage = x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment
	}
	for _, e := range ekus {
		switch e {
		case "server_auth":
			tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
		case "client_auth":
			tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
		case "code_signing":
			tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageCodeSigning)
		case "email_protection":
			tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageEmailProtection)
		case "timestamping":
			tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageTimeStamping)
		default:
			return nil, fmt.Errorf("unsupported extended_key_usage '%s'", e)
		}
	}
	for _, s := range sans {
		if ip := net.ParseIP(s); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, s)
		}
	}
	parent, signer, caPEM := tmpl, key, ""
	if caName != "" {
		if err := g.ensure(caName); err != nil {
			return nil, err
		}
		parent, signer, caPEM, err = g.loadCA(caName)
		if err != nil {
			return nil, err
		}
		tmpl.AuthorityKeyId = parent.SubjectKeyId
	} else if !isCA {
		return nil, fmt.Errorf("option 'ca' is required for a certificate that is not a CA")
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, signer)
	if err != nil {
		return nil, err
	}
	certPEM := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	if caPEM == "" {
		caPEM = certPEM
	}
	m := yamlvalue.NewMap()
	m.Set("ca", caPEM)
	m.Set("certificate", certPEM)
	m.Set("private_key", pemKey(key))
	return m, nil
}

// linkAddress reads one `consumes` entry of a certificate.
func (g *generator) linkAddress(consumes *yamlvalue.Map, kind string) (string, error) {
	return consumedAddress(consumes, kind, g.address)
}

// consumedAddress is the address one `consumes` entry puts into a
// certificate.
func consumedAddress(consumes *yamlvalue.Map, kind string, address LinkAddress) (string, error) {
	if kind != "alternative_name" && kind != "common_name" {
		return "", fmt.Errorf("consumes '%s': only alternative_name and common_name can consume links", kind)
	}
	v, _ := consumes.Get(kind)
	entry, _ := v.(*yamlvalue.Map)
	from, _ := option(entry, "from").(string)
	if from == "" {
		return "", fmt.Errorf("consumes '%s' needs 'from', the name of a link provider", kind)
	}
	addr, err := address(from)
	if err != nil {
		return "", fmt.Errorf("consumes '%s': %w", kind, err)
	}
	props, _ := option(entry, "properties").(*yamlvalue.Map)
	if option(props, "wildcard") == true {
		addr = "*." + addr
	}
	return addr, nil
}

func keyID(pub *rsa.PublicKey) []byte {
	sum := sha1.Sum(x509.MarshalPKCS1PublicKey(pub))
	return sum[:]
}

// loadCA reads a certificate variable to sign with.
func (g *generator) loadCA(name string) (*x509.Certificate, *rsa.PrivateKey, string, error) {
	v, _, err := g.src.Get(name)
	if err != nil {
		return nil, nil, "", err
	}
	m, ok := v.(*yamlvalue.Map)
	if !ok {
		return nil, nil, "", fmt.Errorf("CA '%s' is not a certificate variable", name)
	}
	certPEM, _ := m.Get("certificate")
	keyPEM, _ := m.Get("private_key")
	cs, _ := certPEM.(string)
	ks, _ := keyPEM.(string)
	cb, _ := pem.Decode([]byte(cs))
	kb, _ := pem.Decode([]byte(ks))
	if cb == nil || kb == nil {
		return nil, nil, "", fmt.Errorf("CA '%s' has no PEM certificate and private_key", name)
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, nil, "", fmt.Errorf("CA '%s': %w", name, err)
	}
	var key *rsa.PrivateKey
	if k, err := x509.ParsePKCS1PrivateKey(kb.Bytes); err == nil {
		key = k
	} else if k8, err8 := x509.ParsePKCS8PrivateKey(kb.Bytes); err8 == nil {
		key, _ = k8.(*rsa.PrivateKey)
	}
	if key == nil {
		return nil, nil, "", fmt.Errorf("CA '%s': private key is not an RSA key", name)
	}
	if !cert.IsCA {
		return nil, nil, "", fmt.Errorf("CA '%s' is not a certificate authority (is_ca)", name)
	}
	return cert, key, cs, nil
}

// Generating is a Source that generates values itself, as a config server
// does for the director: it is sent each variable's type, its options as
// parameters (the consumed links' addresses added) and its update mode,
// and keeps or makes the value.
type Generating interface {
	Generate(name, typ string, parameters *yamlvalue.Map, mode string) error
}

// generators bounds the generation requests out at once: a config server
// generates keys on every core it has, one request each.
const generators = 8

// generateOn has gen generate defs, concurrently, a certificate after its
// CA when that is one of them; the first error in defs' order is returned.
func generateOn(gen Generating, defs []manifest.Variable, address LinkAddress, converge bool) error {
	index := map[string]int{}
	for i, d := range defs {
		index[d.Name] = i
	}
	// A variable's wave is one above its CA's.
	wave := make([]int, len(defs))
	var waveOf func(i int, seen map[int]bool) (int, error)
	waveOf = func(i int, seen map[int]bool) (int, error) {
		if wave[i] > 0 {
			return wave[i], nil
		}
		if seen[i] {
			return 0, caCycle(defs[i].Name)
		}
		seen[i] = true
		w := 1
		if ca, _ := option(defs[i].Options, "ca").(string); ca != "" {
			if j, ok := index[ca]; ok {
				caWave, err := waveOf(j, seen)
				if err != nil {
					return 0, err
				}
				w = caWave + 1
			}
		}
		wave[i] = w
		return w, nil
	}
	params := make([]*yamlvalue.Map, len(defs))
	last := 0
	for i, d := range defs {
		w, err := waveOf(i, map[int]bool{})
		if err != nil {
			return err
		}
		last = max(last, w)
		if d.Consumes != nil && address == nil {
			continue
		}
		if params[i], err = parameters(d, address); err != nil {
			return err
		}
	}
	errs := make([]error, len(defs))
	for w := 1; w <= last; w++ {
		var g errgroup.Group
		g.SetLimit(generators)
		for i, d := range defs {
			if wave[i] != w || params[i] == nil {
				continue
			}
			g.Go(func() error {
				errs[i] = gen.Generate(d.Name, d.Type, params[i], updateMode(d, converge))
				return nil
			})
		}
		_ = g.Wait()
		if err := cmp.Or(errs...); err != nil {
			return err
		}
	}
	return nil
}

// parameters are d's options with the consumed links' addresses, as the
// director sends them.
func parameters(d manifest.Variable, address LinkAddress) (*yamlvalue.Map, error) {
	params := yamlvalue.NewMap()
	if d.Options != nil {
		params = yamlvalue.Clone(d.Options).(*yamlvalue.Map)
	}
	for _, kind := range d.Consumes.Keys() {
		addr, err := consumedAddress(d.Consumes, kind, address)
		if err != nil {
			return nil, &namedError{fmt.Errorf("variable '%s': %w", d.Name, err)}
		}
		if kind == "common_name" {
			// As the director: a common_name given wins.
			if !params.Has("common_name") {
				params.Set("common_name", addr)
			}
			continue
		}
		sans, _ := option(params, "alternative_names").([]any)
		params.Set("alternative_names", append(slices.Clone(sans), addr))
	}
	return params, nil
}

// updateMode is the mode the director sends for d: its update_mode, else
// converge with features.converge_variables, else no-overwrite.
func updateMode(d manifest.Variable, converge bool) string {
	switch {
	case d.UpdateMode != "":
		return d.UpdateMode
	case converge:
		return manifest.UpdateConverge
	}
	return manifest.UpdateNoOverwrite
}
