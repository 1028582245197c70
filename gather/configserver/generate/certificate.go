package generate

import (
	"bytes"
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha1"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/bosh-injector/bosh-injector/gather/configserver/credhub"
)

// CertParams are CredHub's certificate generation parameters.
type CertParams struct {
	CommonName       string   `json:"common_name,omitempty"`
	AlternativeNames []string `json:"alternative_names,omitempty"`
	Organization     string   `json:"organization,omitempty"`
	OrganizationUnit string   `json:"organization_unit,omitempty"`
	Locality         string   `json:"locality,omitempty"`
	State            string   `json:"state,omitempty"`
	Country          string   `json:"country,omitempty"`
	KeyLength        int      `json:"key_length,omitempty"`
	Duration         int      `json:"duration,omitempty"`
	CA               string   `json:"ca,omitempty"`
	IsCA             bool     `json:"is_ca,omitempty"`
	SelfSign         bool     `json:"self_sign,omitempty"`
	ExtendedKeyUsage []string `json:"extended_key_usage,omitempty"`
	KeyUsage         []string `json:"key_usage,omitempty"`
}

var extKeyUsages = map[string]x509.ExtKeyUsage{
	"server_auth":      x509.ExtKeyUsageServerAuth,
	"client_auth":      x509.ExtKeyUsageClientAuth,
	"code_signing":     x509.ExtKeyUsageCodeSigning,
	"email_protection": x509.ExtKeyUsageEmailProtection,
	"timestamping":     x509.ExtKeyUsageTimeStamping,
}

var keyUsages = map[string]x509.KeyUsage{
	"digital_signature": x509.KeyUsageDigitalSignature,
	"non_repudiation":   x509.KeyUsageContentCommitment,
	"key_encipherment":  x509.KeyUsageKeyEncipherment,
	"data_encipherment": x509.KeyUsageDataEncipherment,
	"key_agreement":     x509.KeyUsageKeyAgreement,
	"key_cert_sign":     x509.KeyUsageCertSign,
	"crl_sign":          x509.KeyUsageCRLSign,
	"encipher_only":     x509.KeyUsageEncipherOnly,
	"decipher_only":     x509.KeyUsageDecipherOnly,
}

// dnsName is what Guava's InternetDomainName and CredHub's wildcard
// pattern accept as an alternative name that is no IP address.
var dnsName = regexp.MustCompile(`^(\*\.)?([A-Za-z0-9_]([A-Za-z0-9_-]*[A-Za-z0-9_])?\.)*[A-Za-z0-9_]([A-Za-z0-9_-]*[A-Za-z0-9_])?\.?$|^\*$`)

// SelfSigned is CredHub's isSelfSigned: asked for, or a CA without a
// signing CA.
func (p CertParams) SelfSigned() bool { return p.SelfSign || (p.IsCA && p.CA == "") }

// Normalize fills CredHub's defaults (2048-bit keys, 365 days) and the
// self-sign a CA without signer implies.
func (p *CertParams) Normalize() {
	if p.KeyLength == 0 {
		p.KeyLength = DefaultKeyLength
	}
	if p.Duration == 0 {
		p.Duration = 365
	}
	p.SelfSign = p.SelfSigned()
}

// ValidDuration reports CredHub's INVALID_DURATION for a certificate's
// days outside 1-3650.
func ValidDuration(days int) error {
	if days < 1 || days > 3650 {
		return credhub.Reject(credhub.InvalidDuration)
	}
	return nil
}

// Validate checks p as CertificateGenerationRequestParameters.validate does,
// in its order, with its messages.
func (p CertParams) Validate() error {
	if p.Organization == "" && p.State == "" && p.Locality == "" && p.OrganizationUnit == "" && p.CommonName == "" && p.Country == "" {
		return credhub.Reject(credhub.MissingCertificateParams)
	}
	if p.CA == "" && !p.SelfSign && !p.IsCA {
		return credhub.Reject(credhub.MissingSigningCA)
	}
	if p.CA != "" && p.SelfSign {
		return credhub.Reject(credhub.CAAndSelfSign)
	}
	if _, err := ValidKeyLength(p.KeyLength); err != nil {
		return err
	}
	for _, n := range p.AlternativeNames {
		if net.ParseIP(n) == nil && !dnsName.MatchString(n) {
			return credhub.Reject(credhub.InvalidAlternateName)
		}
	}
	for _, u := range p.ExtendedKeyUsage {
		if _, ok := extKeyUsages[u]; !ok {
			return credhub.Reject(credhub.InvalidExtendedKeyUsage(u))
		}
	}
	for _, u := range p.KeyUsage {
		if _, ok := keyUsages[u]; !ok {
			return credhub.Reject(credhub.InvalidKeyUsage(u))
		}
	}
	if p.Duration != 0 {
		if err := ValidDuration(p.Duration); err != nil {
			return err
		}
	}
	for _, f := range []struct {
		value, what string
		max         int
	}{{p.CommonName, "common name", 64}, {p.Organization, "organization", 64}, {p.OrganizationUnit, "organization unit", 64},
		{p.Locality, "locality", 128}, {p.State, "state", 128}, {p.Country, "country", 2}} {
		if len(f.value) > f.max {
			return credhub.Reject(credhub.InvalidCertificateParameter(f.what, strconv.Itoa(f.max)))
		}
	}
	for _, n := range p.AlternativeNames {
		if len(n) > 253 {
			return credhub.Reject(credhub.InvalidCertificateParameter("alternative name", "253"))
		}
	}
	return nil
}

// CertValue is the value of a certificate credential.
type CertValue struct {
	CA          string `json:"ca"`
	Certificate string `json:"certificate"`
	PrivateKey  string `json:"private_key"`
}

// Signer is the CA a certificate is signed by.
type Signer struct {
	Certificate *x509.Certificate
	Key         crypto.Signer
	// PEM is the CA's certificate as stored, returned as the new value's ca.
	PEM string
}

// ParseSigner reads a CA credential's value; CredHub's errors when it has
// no key or is no CA.
func ParseSigner(v CertValue) (*Signer, error) {
	cert, err := ParseCertificate(v.Certificate)
	if err != nil {
		return nil, err
	}
	if v.PrivateKey == "" {
		return nil, credhub.Reject(credhub.CAMissingPrivateKey)
	}
	if !cert.IsCA {
		return nil, credhub.Reject(credhub.CertNotCA)
	}
	block, _ := pem.Decode([]byte(v.PrivateKey))
	if block == nil {
		return nil, credhub.Reject(credhub.MalformedPrivateKey)
	}
	key, err := parsePrivateKey(block.Bytes)
	if err != nil {
		return nil, credhub.Reject(credhub.MalformedPrivateKey)
	}
	return &Signer{Certificate: cert, Key: key, PEM: v.Certificate}, nil
}

func parsePrivateKey(der []byte) (crypto.Signer, error) {
	if k, err := x509.ParsePKCS1PrivateKey(der); err == nil {
		return k, nil
	}
	k, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return nil, err
	}
	s, ok := k.(crypto.Signer)
	if !ok {
		return nil, errors.New("not a signing key")
	}
	return s, nil
}

// ParseCertificate reads one PEM certificate, failing with CredHub's
// INVALID_CERTIFICATE_VALUE.
func ParseCertificate(s string) (*x509.Certificate, error) {
	block, _ := pem.Decode([]byte(s))
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, credhub.Reject(credhub.InvalidCertificateValue)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, credhub.Reject(credhub.InvalidCertificateValue)
	}
	return cert, nil
}

// Certificate generates a certificate credential from normalized, valid
// p: self-signed when p says so, else signed by signer.
func Certificate(ctx context.Context, p CertParams, signer *Signer) (CertValue, error) {
	key, err := rsaKey(ctx, p.KeyLength)
	if err != nil {
		return CertValue{}, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return CertValue{}, err
	}
	ski := subjectKeyID(&key.PublicKey)
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               p.subject(),
		NotBefore:             now,
		NotAfter:              now.Add(time.Duration(p.Duration) * 24 * time.Hour),
		SubjectKeyId:          ski,
		BasicConstraintsValid: true,
		IsCA:                  p.IsCA,
	}
	for _, n := range p.AlternativeNames {
		if ip := net.ParseIP(n); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		}
	}
	for _, u := range p.KeyUsage {
		tmpl.KeyUsage |= keyUsages[u]
	}
	for _, u := range p.ExtendedKeyUsage {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, extKeyUsages[u])
	}
	parent, signingKey := tmpl, crypto.Signer(key)
	if !p.SelfSign {
		if signer == nil {
			return CertValue{}, credhub.Reject(credhub.MissingSigningCA)
		}
		parent, signingKey = signer.Certificate, signer.Key
	} else {
		tmpl.AuthorityKeyId = ski
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, signingKey)
	if err != nil {
		return CertValue{}, err
	}
	certPEM := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	v := CertValue{CA: certPEM, Certificate: certPEM, PrivateKey: privatePEM(key)}
	if !p.SelfSign {
		v.CA = signer.PEM
	}
	return v, nil
}

func (p CertParams) subject() pkix.Name {
	var n pkix.Name
	n.CommonName = p.CommonName
	add := func(dst *[]string, v string) {
		if v != "" {
			*dst = append(*dst, v)
		}
	}
	add(&n.Organization, p.Organization)
	add(&n.OrganizationalUnit, p.OrganizationUnit)
	add(&n.Locality, p.Locality)
	add(&n.Province, p.State)
	add(&n.Country, p.Country)
	return n
}

func subjectKeyID(pub *rsa.PublicKey) []byte {
	// RFC 5280 4.2.1.2 method 1: SHA-1 of the subjectPublicKey bits, the
	// PKCS#1 encoding of an RSA key.
	sum := sha1.Sum(x509.MarshalPKCS1PublicKey(pub))
	return sum[:]
}

// ParamsOf are the generation parameters an existing certificate answers
// to, as CredHub's CertificateGenerationParameters(parsedCertificate,
// caName) reads them, for converge's comparison.
func ParamsOf(cert *x509.Certificate, caName string) CertParams {
	first := func(s []string) string {
		if len(s) == 0 {
			return ""
		}
		return s[0]
	}
	p := CertParams{
		CommonName:       cert.Subject.CommonName,
		Organization:     first(cert.Subject.Organization),
		OrganizationUnit: first(cert.Subject.OrganizationalUnit),
		Locality:         first(cert.Subject.Locality),
		State:            first(cert.Subject.Province),
		Country:          first(cert.Subject.Country),
		CA:               caName,
		IsCA:             cert.IsCA,
		SelfSign:         caName == "" && SelfSigned(cert),
	}
	if rk, ok := cert.PublicKey.(*rsa.PublicKey); ok {
		p.KeyLength = rk.N.BitLen()
	}
	p.AlternativeNames = append(p.AlternativeNames, cert.DNSNames...)
	for _, ip := range cert.IPAddresses {
		p.AlternativeNames = append(p.AlternativeNames, ip.String())
	}
	for name, u := range keyUsages {
		if cert.KeyUsage&u != 0 {
			p.KeyUsage = append(p.KeyUsage, name)
		}
	}
	for name, u := range extKeyUsages {
		if slices.Contains(cert.ExtKeyUsage, u) {
			p.ExtendedKeyUsage = append(p.ExtendedKeyUsage, name)
		}
	}
	return p
}

// SameIgnoringDuration is CredHub's equalsIgnoringDuration: converge keeps
// a certificate whose other parameters match. Lists compare as sets and IP
// addresses by value.
func (p CertParams) SameIgnoringDuration(q CertParams) bool {
	set := func(s []string) []string {
		out := make([]string, 0, len(s))
		for _, v := range s {
			if ip := net.ParseIP(v); ip != nil {
				v = ip.String()
			}
			out = append(out, v)
		}
		slices.Sort(out)
		return slices.Compact(out)
	}
	return p.CommonName == q.CommonName && p.Organization == q.Organization && p.OrganizationUnit == q.OrganizationUnit &&
		p.Locality == q.Locality && p.State == q.State && p.Country == q.Country &&
		p.KeyLength == q.KeyLength && strings.EqualFold(p.CA, q.CA) && p.IsCA == q.IsCA && p.SelfSign == q.SelfSign &&
		slices.Equal(set(p.AlternativeNames), set(q.AlternativeNames)) &&
		slices.Equal(set(p.KeyUsage), set(q.KeyUsage)) &&
		slices.Equal(set(p.ExtendedKeyUsage), set(q.ExtendedKeyUsage))
}

// SelfSigned reports whether cert is signed by its own key.
func SelfSigned(cert *x509.Certificate) bool {
	return bytes.Equal(cert.RawIssuer, cert.RawSubject) &&
		cert.CheckSignature(cert.SignatureAlgorithm, cert.RawTBSCertificate, cert.Signature) == nil
}
