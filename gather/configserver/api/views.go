package api

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/bosh-injector/bosh-injector/gather/configserver/generate"
	"github.com/bosh-injector/bosh-injector/gather/configserver/store"
)

// Credential types CredHub knows.
const (
	typeValue       = "value"
	typeJSON        = "json"
	typePassword    = "password"
	typeUser        = "user"
	typeCertificate = "certificate"
	typeRSA         = "rsa"
	typeSSH         = "ssh"
)

// userValue is a user credential as stored: the salt keeps password_hash
// the same on every read, as CredHub keeps it.
type userValue struct {
	Username *string `json:"username"`
	Password string  `json:"password"`
	Salt     string  `json:"salt,omitempty"`
}

// keyValue is an rsa or ssh credential as stored and set.
type keyValue struct {
	PublicKey  *string `json:"public_key"`
	PrivateKey *string `json:"private_key"`
}

// certValue is a certificate credential as stored and shown.
type certValue struct {
	CA          *string `json:"ca"`
	Certificate *string `json:"certificate"`
	PrivateKey  *string `json:"private_key"`
}

// view is CredHub's CredentialView, with CertificateView's extra fields
// for certificates. Like CredHub's mapper it writes a missing metadata as
// null.
type view struct {
	Type             string          `json:"type"`
	VersionCreatedAt string          `json:"version_created_at"`
	ID               string          `json:"id"`
	Name             string          `json:"name"`
	Metadata         json.RawMessage `json:"metadata"`
	Value            any             `json:"value"`

	ExpiryDate           *string `json:"expiry_date,omitempty"`
	CertificateAuthority *bool   `json:"certificate_authority,omitempty"`
	SelfSigned           *bool   `json:"self_signed,omitempty"`
	Generated            *bool   `json:"generated,omitempty"`
	Transitional         *bool   `json:"transitional,omitempty"`
}

// instant is how CredHub (Jackson's Instant) writes a time.
func instant(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// viewOf is the API's view of a stored version: a certificate's ca is
// its signer's followed by the one its users also trust while the CA
// rotates, as CredHub's with certificates.concatenate_cas (its Kubernetes
// configuration's setting, and what rotating a CA without a trust gap
// needs).
func viewOf(v *store.Version) view {
	out := plainViewOf(v)
	if v.Type == typeCertificate && v.TrustedCA != "" {
		var cv certValue
		if json.Unmarshal(v.Value, &cv) == nil && cv.CA != nil {
			bundle := strings.TrimSpace(*cv.CA) + "\n" + strings.TrimSpace(v.TrustedCA) + "\n"
			cv.CA = &bundle
			out.Value = cv
		}
	}
	return out
}

// plainViewOf is the view of a version with a certificate's ca its
// signer's alone, as CredHub answers a change of a CA's transitional
// version.
func plainViewOf(v *store.Version) view {
	out := view{Type: v.Type, VersionCreatedAt: instant(v.Created), ID: v.ID, Name: v.Name, Metadata: v.Metadata, Value: v.Value}
	switch v.Type {
	case typeUser:
		var u userValue
		if json.Unmarshal(v.Value, &u) == nil {
			out.Value = map[string]any{"username": u.Username, "password": u.Password,
				"password_hash": generate.SHA512Crypt(u.Password, u.Salt)}
		}
	case typeSSH:
		var k keyValue
		if json.Unmarshal(v.Value, &k) == nil {
			var fp *string
			if k.PublicKey != nil {
				s := generate.SSHFingerprint(*k.PublicKey)
				fp = &s
			}
			out.Value = map[string]any{"public_key": k.PublicKey, "private_key": k.PrivateKey, "public_key_fingerprint": fp}
		}
	case typeCertificate:
		info := certInfoOf(v)
		generated, transitional := len(v.Parameters) > 0, v.Transitional
		out.CertificateAuthority, out.SelfSigned = &info.isCA, &info.selfSigned
		out.Generated, out.Transitional = &generated, &transitional
		if !info.expiry.IsZero() {
			e := instant(info.expiry)
			out.ExpiryDate = &e
		}
	}
	return out
}

// certInfo is what a stored certificate says about itself.
type certInfo struct {
	value            certValue
	isCA, selfSigned bool
	expiry           time.Time
}

func certInfoOf(v *store.Version) certInfo {
	var info certInfo
	if json.Unmarshal(v.Value, &info.value) != nil || info.value.Certificate == nil {
		return info
	}
	cert, err := generate.ParseCertificate(*info.value.Certificate)
	if err != nil {
		return info
	}
	info.isCA, info.expiry = cert.IsCA, cert.NotAfter
	info.selfSigned = generate.SelfSigned(cert)
	return info
}

// findResult is CredHub's FindCredentialResult.
type findResult struct {
	VersionCreatedAt string `json:"version_created_at"`
	Name             string `json:"name"`
}

// certificateVersion and certificateCredential are CredHub's
// CertificateVersionView and CertificateCredentialView.
type certificateVersion struct {
	ID                   string `json:"id"`
	ExpiryDate           string `json:"expiry_date"`
	Transitional         bool   `json:"transitional"`
	CertificateAuthority bool   `json:"certificate_authority"`
	SelfSigned           bool   `json:"self_signed"`
	Generated            bool   `json:"generated"`
}

type certificateCredential struct {
	Name     string               `json:"name"`
	ID       string               `json:"id"`
	Versions []certificateVersion `json:"versions"`
	SignedBy string               `json:"signed_by"`
	Signs    []string             `json:"signs"`
}
