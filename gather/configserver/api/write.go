package api

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"slices"
	"strings"

	"github.com/bosh-injector/bosh-injector/gather/configserver/auth"
	"github.com/bosh-injector/bosh-injector/gather/configserver/credhub"
	"github.com/bosh-injector/bosh-injector/gather/configserver/generate"
	"github.com/bosh-injector/bosh-injector/gather/configserver/store"
)

// Write modes of CredentialWriteMode.
const (
	modeOverwrite   = "overwrite"
	modeNoOverwrite = "no-overwrite"
	modeConverge    = "converge"
)

// Name rules of BaseCredentialRequest.
var (
	slashRule = regexp.MustCompile(`^(/|(/?[^/]+)*)$`)
	charRule  = regexp.MustCompile(`^[a-zA-Z0-9\-_/.:,()\[\]+]*$`)
)

// common are the fields set and generate share, validated as
// BaseCredentialRequest and BaseCredentialGenerateRequest do.
type common struct {
	Name      *string         `json:"name"`
	Type      string          `json:"type"`
	Metadata  json.RawMessage `json:"metadata"`
	Mode      *string         `json:"mode"`
	Overwrite *bool           `json:"overwrite"`
}

func (c *common) validate(validTypes []string, typeMessage string) (string, error) {
	name := ""
	if c.Name != nil {
		name = absolute(*c.Name)
	}
	switch {
	case len(name) < 2:
		return "", credhub.Reject(credhub.MissingName)
	case !slashRule.MatchString(name):
		return "", credhub.Reject(credhub.InvalidSlashInName)
	case !charRule.MatchString(name):
		return "", credhub.Reject(credhub.InvalidCharacterInName)
	}
	if c.Mode != nil && *c.Mode != modeOverwrite && *c.Mode != modeNoOverwrite && *c.Mode != modeConverge {
		return "", credhub.Reject(credhub.InvalidMode)
	}
	c.Type = strings.ToLower(c.Type)
	if !slices.Contains(validTypes, c.Type) {
		return "", credhub.Reject(typeMessage)
	}
	if c.Mode != nil && c.Overwrite != nil {
		return "", credhub.Reject(credhub.OverwriteAndModeBoth)
	}
	if len(name) > 1024 {
		return "", credhub.Reject(credhub.NameTooLong)
	}
	if len(c.Metadata) > 7000 {
		return "", credhub.Reject(credhub.MetadataTooLong)
	}
	if bytes.Equal(bytes.TrimSpace(c.Metadata), []byte("null")) {
		c.Metadata = nil
	}
	return name, nil
}

// keeps reports whether the request's mode keeps an existing version
// outright (no-overwrite, overwrite: false), or writes outright
// (overwrite, overwrite: true); neither leaves it to converge.
func (c *common) keeps() (keep, write bool) {
	switch {
	case c.Mode != nil && *c.Mode == modeNoOverwrite, c.Overwrite != nil && !*c.Overwrite:
		return true, false
	case c.Mode != nil && *c.Mode == modeOverwrite, c.Overwrite != nil && *c.Overwrite:
		return false, true
	}
	return false, false
}

var (
	allTypes      = []string{typeValue, typeJSON, typePassword, typeUser, typeCertificate, typeRSA, typeSSH}
	generateTypes = []string{typePassword, typeUser, typeCertificate, typeRSA, typeSSH}
)

type setRequest struct {
	common
	Value json.RawMessage `json:"value"`
}

// set is PUT /api/v1/data. Today's CredHub always writes a new version on
// set; mode and the legacy overwrite are honoured as well (CredHub 1.x's
// set), overwrite being the default.
func (s *Server) set(w http.ResponseWriter, r *http.Request, c *auth.Caller) error {
	var req setRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	name, err := req.validate(allTypes, credhub.InvalidTypeSet)
	if err != nil {
		return err
	}
	if !c.May(name) {
		return errNotFound
	}
	value, caName, err := s.setValue(r.Context(), c, req.Type, req.Value)
	if err != nil {
		return err
	}
	keep, _ := req.common.keeps()
	v, err := s.Store.Write(r.Context(), name, func(cur *store.Version) (*store.Version, error) {
		if cur != nil && !c.May(cur.Name) {
			return nil, errNotFound
		}
		if cur != nil && cur.Type != req.Type {
			return nil, credhub.Reject(credhub.TypeMismatch)
		}
		if cur != nil && (keep || (req.Mode != nil && *req.Mode == modeConverge && sameValue(req.Type, cur.Value, value))) {
			return nil, nil
		}
		return &store.Version{Type: req.Type, Value: value, Metadata: req.Metadata, CAName: caName}, nil
	})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, viewOf(v))
	return nil
}

// setValue checks a set request's value as CredHub's set requests do and
// returns it as stored.
func (s *Server) setValue(ctx context.Context, c *auth.Caller, typ string, raw json.RawMessage) (json.RawMessage, string, error) {
	switch typ {
	case typeValue, typePassword:
		var v string
		if json.Unmarshal(raw, &v) != nil || v == "" {
			if typ == typePassword {
				return nil, "", credhub.Reject(credhub.MissingPassword)
			}
			return nil, "", credhub.Reject(credhub.MissingValue)
		}
		return marshal(v), "", nil
	case typeJSON:
		var v map[string]any
		if json.Unmarshal(raw, &v) != nil || v == nil {
			return nil, "", credhub.Reject(credhub.MissingValue)
		}
		return marshal(v), "", nil
	case typeUser:
		var v struct {
			Username *string `json:"username"`
			Password string  `json:"password"`
		}
		if err := strictUnmarshal(raw, &v); err != nil {
			return nil, "", err
		}
		if v.Password == "" {
			return nil, "", credhub.Reject(credhub.MissingPassword)
		}
		nilIfEmpty(&v.Username)
		salt, err := generate.Salt()
		if err != nil {
			return nil, "", err
		}
		return marshal(userValue{Username: v.Username, Password: v.Password, Salt: salt}), "", nil
	case typeRSA, typeSSH:
		var v keyValue
		if err := strictUnmarshal(raw, &v); err != nil {
			return nil, "", err
		}
		if empty(v.PublicKey) && empty(v.PrivateKey) {
			return nil, "", credhub.Reject(credhub.MissingRSASSHParameters)
		}
		nilIfEmpty(&v.PublicKey, &v.PrivateKey)
		return marshal(v), "", nil
	default: // certificate
		var v struct {
			certValue
			CAName *string `json:"ca_name"`
		}
		if err := strictUnmarshal(raw, &v); err != nil {
			return nil, "", err
		}
		if empty(v.CA) && empty(v.Certificate) && empty(v.PrivateKey) && empty(v.CAName) {
			return nil, "", credhub.Reject(credhub.MissingCertificateCreds)
		}
		if !empty(v.Certificate) {
			if _, err := generate.ParseCertificate(*v.Certificate); err != nil {
				return nil, "", err
			}
		}
		nilIfEmpty(&v.CA, &v.Certificate, &v.PrivateKey)
		caName := ""
		if !empty(v.CAName) {
			caName = absolute(*v.CAName)
			signer, _, err := s.signer(ctx, c, caName, false)
			if err != nil {
				return nil, "", err
			}
			v.CA = &signer.PEM
		}
		return marshal(v.certValue), caName, nil
	}
}

func empty(s *string) bool { return s == nil || *s == "" }

// nilIfEmpty stores "" as absent, as CredHub's EmptyStringToNull reads
// the fields the credhub CLI sends empty.
func nilIfEmpty(fields ...**string) {
	for _, f := range fields {
		if empty(*f) {
			*f = nil
		}
	}
}

// sameValue compares values for converge; a user's salt is no part of it.
func sameValue(typ string, a, b json.RawMessage) bool {
	if typ == typeUser {
		var ua, ub userValue
		_ = json.Unmarshal(a, &ua)
		_ = json.Unmarshal(b, &ub)
		return ua.Password == ub.Password && (ua.Username == nil) == (ub.Username == nil) &&
			(ua.Username == nil || *ua.Username == *ub.Username)
	}
	var va, vb any
	_ = json.Unmarshal(a, &va)
	_ = json.Unmarshal(b, &vb)
	return bytes.Equal(marshal(va), marshal(vb))
}

type generateRequest struct {
	common
	Parameters json.RawMessage `json:"parameters"`
	Value      json.RawMessage `json:"value"`
	Regenerate bool            `json:"regenerate"`
}

// generate is POST /api/v1/data: generate, or regenerate with
// "regenerate": true.
func (s *Server) generate(w http.ResponseWriter, r *http.Request, c *auth.Caller) error {
	var req generateRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	if req.Regenerate {
		return s.regenerateName(w, r, c, req.Name, req.Metadata)
	}
	name, err := req.validate(allTypes, credhub.InvalidTypeGenerate)
	if err != nil {
		return err
	}
	if !slices.Contains(generateTypes, req.Type) {
		return credhub.Reject(credhub.CannotGenerateType)
	}
	plan, err := s.plan(r.Context(), c, req.Type, req.Parameters, req.Value)
	if err != nil {
		return err
	}
	if !c.May(name) {
		return errNotFound
	}
	keep, overwrite := req.common.keeps()
	var made *store.Version
	v, err := s.Store.Write(r.Context(), name, func(cur *store.Version) (*store.Version, error) {
		if cur != nil && !c.May(cur.Name) {
			return nil, errNotFound
		}
		if cur != nil && cur.Type != req.Type {
			return nil, credhub.Reject(credhub.TypeMismatch)
		}
		if cur != nil && (keep || (!overwrite && plan.matches(cur))) {
			return nil, nil
		}
		if made == nil {
			value, err := plan.make(r.Context())
			if err != nil {
				return nil, err
			}
			made = plan.version(req.Type, value, nil)
		}
		next := *made
		next.Metadata = req.Metadata
		return &next, nil
	})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, viewOf(v))
	return nil
}

// plan is a generation: the value to make, the parameters stored with it
// and converge's test whether a current version already answers them.
type plan struct {
	params  json.RawMessage
	caName  string
	make    func(context.Context) (json.RawMessage, error)
	matches func(cur *store.Version) bool
	// trustedCA is the certificate of the signing CA's other version.
	trustedCA string
}

// version is the version p makes with value.
func (p *plan) version(typ string, value, metadata json.RawMessage) *store.Version {
	return &store.Version{Type: typ, Value: value, Metadata: metadata, Parameters: p.params, CAName: p.caName, TrustedCA: p.trustedCA}
}

// plan reads a generate request's parameters for typ as CredHub's
// generate requests do; the CA of a signed certificate must exist and be
// the caller's to use.
func (s *Server) plan(ctx context.Context, c *auth.Caller, typ string, rawParams, rawValue json.RawMessage) (*plan, error) {
	switch typ {
	case typePassword, typeUser:
		var p struct {
			generate.PasswordParams
			Username *string `json:"username"`
		}
		if err := strictUnmarshal(rawParams, &p); err != nil {
			return nil, err
		}
		if typ == typePassword && p.Username != nil {
			return nil, credhub.Reject(credhub.InvalidJSONKey("username"))
		}
		if typ == typeUser && len(rawValue) > 0 && string(rawValue) != "null" {
			var v struct {
				Username *string `json:"username"`
			}
			if err := strictUnmarshal(rawValue, &v); err != nil {
				return nil, err
			}
			if p.Username == nil {
				p.Username = v.Username
			}
		}
		if p.Validate() != nil {
			return nil, credhub.Reject(credhub.ExcludesAllCharsets)
		}
		p.PasswordParams = p.Normalized()
		params := marshal(p)
		return &plan{
			params: params,
			make: func(context.Context) (json.RawMessage, error) {
				pw, err := generate.Password(p.PasswordParams)
				if err != nil || typ == typePassword {
					return marshal(pw), err
				}
				username := p.Username
				if username == nil {
					u, err := generate.Username()
					if err != nil {
						return nil, err
					}
					username = &u
				}
				salt, err := generate.Salt()
				return marshal(userValue{Username: username, Password: pw, Salt: salt}), err
			},
			matches: func(cur *store.Version) bool { return sameValue(typeJSON, cur.Parameters, params) },
		}, nil
	case typeRSA, typeSSH:
		var p struct {
			KeyLength  int    `json:"key_length,omitempty"`
			SSHComment string `json:"ssh_comment,omitempty"`
		}
		if err := strictUnmarshal(rawParams, &p); err != nil {
			return nil, err
		}
		if typ == typeRSA && p.SSHComment != "" {
			return nil, credhub.Reject(credhub.InvalidJSONKey("ssh_comment"))
		}
		bits, err := generate.ValidKeyLength(p.KeyLength)
		if err != nil {
			return nil, err
		}
		p.KeyLength = bits
		return keyPlan(typ, bits, p.SSHComment, marshal(p)), nil
	default: // certificate
		if len(rawParams) == 0 || string(rawParams) == "null" {
			return nil, credhub.Reject(credhub.NoCertificateParameters)
		}
		var p generate.CertParams
		if err := strictUnmarshal(rawParams, &p); err != nil {
			return nil, err
		}
		if err := p.Validate(); err != nil {
			return nil, err
		}
		if p.CA != "" {
			p.CA = absolute(p.CA)
		}
		p.Normalize()
		return s.certPlan(ctx, c, p, false)
	}
}

func keyPlan(typ string, bits int, comment string, params json.RawMessage) *plan {
	return &plan{
		params: params,
		make: func(ctx context.Context) (json.RawMessage, error) {
			if typ == typeRSA {
				v, err := generate.RSA(ctx, bits)
				return marshal(v), err
			}
			v, err := generate.SSH(ctx, bits, comment)
			return marshal(keyValue{PublicKey: &v.PublicKey, PrivateKey: &v.PrivateKey}), err
		},
		matches: func(cur *store.Version) bool {
			var k keyValue
			if json.Unmarshal(cur.Value, &k) != nil || k.PublicKey == nil {
				return false
			}
			if typ == typeRSA {
				return generate.RSAKeyLength(*k.PublicKey) == bits
			}
			have, haveComment := generate.SSHKeyLength(*k.PublicKey)
			return have == bits && haveComment == comment
		},
	}
}

// certPlan plans certificate p: signed by the version of its CA that
// signs (see signer), its users trusting the CA's other version too; or
// self-signed.
func (s *Server) certPlan(ctx context.Context, c *auth.Caller, p generate.CertParams, transitionalSigns bool) (*plan, error) {
	var signer *generate.Signer
	trusted := ""
	if !p.SelfSign {
		var err error
		if signer, trusted, err = s.signer(ctx, c, p.CA, transitionalSigns); err != nil {
			return nil, err
		}
	}
	return &plan{
		params:    marshal(p),
		caName:    p.CA,
		trustedCA: trusted,
		make: func(ctx context.Context) (json.RawMessage, error) {
			v, err := generate.Certificate(ctx, p, signer)
			return marshal(certValue{CA: &v.CA, Certificate: &v.Certificate, PrivateKey: &v.PrivateKey}), err
		},
		matches: func(cur *store.Version) bool {
			var cv certValue
			if json.Unmarshal(cur.Value, &cv) != nil || cv.Certificate == nil {
				return false
			}
			// A CA that changed since re-signs, as CredHub's converge does.
			if signer != nil && (cv.CA == nil || *cv.CA != signer.PEM) {
				return false
			}
			cert, err := generate.ParseCertificate(*cv.Certificate)
			return err == nil && generate.ParamsOf(cert, cur.CAName).SameIgnoringDuration(p)
		},
	}, nil
}

// signer is the version of CA caName that signs, which the caller must be
// allowed to use: its current one, or its transitional one when that is
// newer and transitionalSigns. With it comes the certificate of the CA's
// other version, if any, which what it signs trusts too while the CA
// rotates (CredHub's trusted_ca).
func (s *Server) signer(ctx context.Context, c *auth.Caller, caName string, transitionalSigns bool) (*generate.Signer, string, error) {
	if !c.May(caName) {
		return nil, "", errCANotFound
	}
	vs, err := s.Store.Versions(ctx, caName)
	if err != nil {
		return nil, "", err
	}
	signing, other := store.Active(vs), store.Transitional(vs)
	if signing == nil || !c.May(signing.Name) {
		return nil, "", errCANotFound
	}
	if signing.Type != typeCertificate {
		return nil, "", credhub.Reject(credhub.NotACAName)
	}
	if other == signing {
		other = nil
	}
	if transitionalSigns && other != nil && other.Number > signing.Number {
		signing, other = other, signing
	}
	v := certInfoOf(signing).value
	if v.Certificate == nil {
		return nil, "", credhub.Reject(credhub.InvalidCertificateValue)
	}
	pk := ""
	if v.PrivateKey != nil {
		pk = *v.PrivateKey
	}
	signer, err := generate.ParseSigner(generate.CertValue{Certificate: *v.Certificate, PrivateKey: pk})
	if err != nil {
		return nil, "", err
	}
	trusted := ""
	if other != nil {
		trusted = certPEM(other)
	}
	return signer, trusted, nil
}

type regenerateRequest struct {
	Name     *string         `json:"name"`
	Metadata json.RawMessage `json:"metadata"`
}

// regenerate is POST /api/v1/regenerate.
func (s *Server) regenerate(w http.ResponseWriter, r *http.Request, c *auth.Caller) error {
	var req regenerateRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	return s.regenerateName(w, r, c, req.Name, req.Metadata)
}

// regenerateName writes a new version of a credential generated anew with
// the parameters of its current one.
func (s *Server) regenerateName(w http.ResponseWriter, r *http.Request, c *auth.Caller, rawName *string, metadata json.RawMessage) error {
	if rawName == nil || *rawName == "" {
		return credhub.Reject(credhub.MissingName)
	}
	v, err := s.regenerateVersion(r.Context(), c, absolute(*rawName), regeneration{metadata: metadata})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, viewOf(v))
	return nil
}

// regeneration is how a credential is regenerated: what /api/v1/regenerate
// and bulk-regenerate leave at their zero values, and the options of
// /api/v1/certificates/<id>/regenerate.
type regeneration struct {
	// metadata, if any, replaces the current version's.
	metadata json.RawMessage
	// transitional makes the new version a CA's transitional one.
	transitional bool
	// transitionalSigns signs with the CA's transitional version when it
	// is newer than its current one.
	transitionalSigns bool
	// keyLength and duration, when not 0, replace a certificate's.
	keyLength, duration int
}

// regenerateVersion writes a new version of name, generated with the
// parameters of its current one as how says.
func (s *Server) regenerateVersion(ctx context.Context, c *auth.Caller, name string, how regeneration) (*store.Version, error) {
	if !c.May(name) {
		return nil, errNotFound
	}
	cur, err := s.Store.Current(ctx, name)
	if err != nil {
		return nil, err
	}
	if cur == nil || !c.May(cur.Name) {
		return nil, errNotFound
	}
	var p *plan
	switch cur.Type {
	case typePassword, typeUser:
		if len(cur.Parameters) == 0 {
			if cur.Type == typePassword {
				return nil, credhub.Reject(credhub.CannotRegeneratePassword)
			}
			return nil, credhub.Reject(credhub.CannotRegenerateUser)
		}
		params := cur.Parameters
		if cur.Type == typeUser {
			// The user keeps its name; only the password changes.
			var u userValue
			_ = json.Unmarshal(cur.Value, &u)
			var pp map[string]any
			_ = json.Unmarshal(params, &pp)
			pp["username"] = u.Username
			params = marshal(pp)
		}
		if p, err = s.plan(ctx, c, cur.Type, params, nil); err != nil {
			return nil, err
		}
	case typeRSA, typeSSH:
		var k keyValue
		_ = json.Unmarshal(cur.Value, &k)
		bits, comment := 0, ""
		if k.PublicKey != nil {
			if cur.Type == typeRSA {
				bits = generate.RSAKeyLength(*k.PublicKey)
			} else {
				bits, comment = generate.SSHKeyLength(*k.PublicKey)
			}
		}
		if bits, err = generate.ValidKeyLength(bits); err != nil {
			bits = generate.DefaultKeyLength
		}
		p = keyPlan(cur.Type, bits, comment, marshal(map[string]any{"key_length": bits}))
	case typeCertificate:
		info := certInfoOf(cur)
		if info.value.Certificate == nil || (cur.CAName == "" && !info.selfSigned) {
			return nil, credhub.Reject(credhub.CannotRegenerateCert)
		}
		cert, err := generate.ParseCertificate(*info.value.Certificate)
		if err != nil {
			return nil, err
		}
		params := generate.ParamsOf(cert, cur.CAName)
		var stored generate.CertParams
		if json.Unmarshal(cur.Parameters, &stored) == nil {
			params.Duration = stored.Duration
		}
		if _, err := generate.ValidKeyLength(params.KeyLength); err != nil {
			params.KeyLength = generate.DefaultKeyLength
		}
		if how.keyLength != 0 {
			if params.KeyLength, err = generate.ValidKeyLength(how.keyLength); err != nil {
				return nil, err
			}
		}
		if how.duration != 0 {
			if err := generate.ValidDuration(how.duration); err != nil {
				return nil, err
			}
			params.Duration = how.duration
		}
		params.Normalize()
		if p, err = s.certPlan(ctx, c, params, how.transitionalSigns); err != nil {
			return nil, err
		}
	default:
		return nil, credhub.Reject(credhub.InvalidTypeRegenerate)
	}
	value, err := p.make(ctx)
	if err != nil {
		return nil, err
	}
	metadata := how.metadata
	if len(metadata) == 0 {
		metadata = cur.Metadata
	}
	return s.Store.Write(ctx, name, func(now *store.Version) (*store.Version, error) {
		if now == nil {
			return nil, errNotFound
		}
		if now.Type != cur.Type {
			return nil, credhub.Reject(credhub.TypeMismatch)
		}
		next := p.version(cur.Type, value, metadata)
		next.Transitional = how.transitional
		return next, nil
	})
}

type bulkRegenerateRequest struct {
	SignedBy *string `json:"signed_by"`
}

// bulkRegenerate is POST /api/v1/bulk-regenerate: every certificate the
// CA signs regenerated, and what regenerated intermediate CAs sign in
// turn (credhub bulk-regenerate --signed-by, for CA rotation).
func (s *Server) bulkRegenerate(w http.ResponseWriter, r *http.Request, c *auth.Caller) error {
	var req bulkRegenerateRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	if empty(req.SignedBy) {
		return credhub.Reject(credhub.MissingSignedBy)
	}
	signer := absolute(*req.SignedBy)
	if !c.May(signer) {
		return errNotFound
	}
	done := map[string]bool{strings.ToLower(signer): true}
	names := []string{}
	var walk func(ca string) error
	walk = func(ca string) error {
		all, err := s.Store.All(r.Context())
		if err != nil {
			return err
		}
		for _, v := range all {
			key := strings.ToLower(v.Name)
			if v.Type != typeCertificate || !strings.EqualFold(v.CAName, ca) || done[key] {
				continue
			}
			done[key] = true
			nv, err := s.regenerateVersion(r.Context(), c, v.Name, regeneration{})
			if err != nil {
				return err
			}
			names = append(names, nv.Name)
			if certInfoOf(nv).isCA {
				if err := walk(nv.Name); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(signer); err != nil {
		return err
	}
	slices.SortFunc(names, func(a, b string) int { return strings.Compare(strings.ToLower(a), strings.ToLower(b)) })
	writeJSON(w, http.StatusOK, map[string][]string{"regenerated_credentials": names})
	return nil
}

// delete is DELETE /api/v1/data?name=: every version; 204.
func (s *Server) delete(w http.ResponseWriter, r *http.Request, c *auth.Caller) error {
	name := r.URL.Query().Get("name")
	if name == "" {
		return credhub.Reject(credhub.MissingQueryParameter("name"))
	}
	name = absolute(name)
	if !c.May(name) {
		return errNotFound
	}
	cur, err := s.Store.Current(r.Context(), name)
	if err != nil {
		return err
	}
	if cur == nil || !c.May(cur.Name) {
		return errNotFound
	}
	found, err := s.Store.Delete(r.Context(), name)
	if err != nil {
		return err
	}
	if !found {
		return errNotFound
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// strictUnmarshal decodes a nested object strictly; absent is empty.
func strictUnmarshal(raw json.RawMessage, v any) error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			return credhub.Reject(credhub.InvalidJSONKey(strings.Trim(f, `"`)))
		}
		return credhub.Reject(credhub.BadRequest)
	}
	return nil
}

func marshal(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}
