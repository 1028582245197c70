package api

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/bosh-injector/bosh-injector/gather/configserver/auth"
	"github.com/bosh-injector/bosh-injector/gather/configserver/credhub"
	"github.com/bosh-injector/bosh-injector/gather/configserver/store"
)

// CredHub's certificates endpoints, by which a CA is rotated without a
// trust gap (credhub-release's docs/ca-rotation.md, with credhub curl):
//
//  1. regenerate the CA as transitional (POST …/<id>/regenerate
//     {"set_as_transitional": true}); what it signs gets a new version
//     whose ca is the old CA then the new one; deploy: every instance
//     trusts both.
//  2. move the mark to the old version (PUT …/<id>/update_transitional_version
//     {"version": "<old id>"}): the new CA signs from now on; deploy.
//  3. regenerate what it signs (bulk-regenerate --signed-by): each is
//     signed by the new CA and trusts both; deploy.
//  4. clear the mark ({"version": null}): what it signs trusts the new CA
//     alone; deploy.
//
// <id> is the credential's id (GET /api/v1/certificates?name=), not a
// version's. A CA made elsewhere rotates the same way with versions set
// rather than generated: step 1 is POST …/<id>/versions {"value": {…},
// "transitional": true}, and a version may be deleted (DELETE
// …/<id>/versions/<version id>), never the last.

// certificates is GET /api/v1/certificates[?name=]: certificate
// credentials with their versions, signers and what they sign.
func (s *Server) certificates(w http.ResponseWriter, r *http.Request, c *auth.Caller) error {
	all, err := s.Store.All(r.Context())
	if err != nil {
		return err
	}
	all = slices.DeleteFunc(all, func(v store.Version) bool { return v.Type != typeCertificate || !c.May(v.Name) })
	name := ""
	if r.URL.Query().Has("name") {
		name = absolute(r.URL.Query().Get("name"))
	}
	out := []certificateCredential{}
	for _, cur := range all {
		if name != "" && !strings.EqualFold(cur.Name, name) {
			continue
		}
		vs, err := s.Store.Versions(r.Context(), cur.Name)
		if err != nil {
			return err
		}
		cc := certificateCredential{Name: cur.Name, ID: cur.CredentialID, SignedBy: cur.CAName, Signs: []string{}}
		for _, v := range vs {
			info := certInfoOf(&v)
			expiry := ""
			if !info.expiry.IsZero() {
				expiry = instant(info.expiry)
			}
			cc.Versions = append(cc.Versions, certificateVersion{ID: v.ID, ExpiryDate: expiry, Transitional: v.Transitional,
				CertificateAuthority: info.isCA, SelfSigned: info.selfSigned, Generated: len(v.Parameters) > 0})
		}
		if cc.SignedBy == "" && len(cc.Versions) > 0 && cc.Versions[0].SelfSigned {
			cc.SignedBy = cur.Name
		}
		for _, o := range all {
			if strings.EqualFold(o.CAName, cur.Name) && o.Name != cur.Name {
				cc.Signs = append(cc.Signs, o.Name)
			}
		}
		out = append(out, cc)
	}
	if name != "" && len(out) == 0 {
		return errNotFound
	}
	writeJSON(w, http.StatusOK, map[string]any{"certificates": out})
	return nil
}

// credential is the versions of the certificate credential the request's
// {id} names, newest first, if the caller may use it.
func (s *Server) credential(r *http.Request, c *auth.Caller) ([]store.Version, error) {
	vs, err := s.Store.OfCredential(r.Context(), r.PathValue("id"))
	if err != nil {
		return nil, err
	}
	if len(vs) == 0 || vs[0].Type != typeCertificate || !c.May(vs[0].Name) {
		return nil, errNotFound
	}
	return vs, nil
}

type certificateRegenerateRequest struct {
	SetAsTransitional             bool            `json:"set_as_transitional"`
	AllowTransitionalParentToSign bool            `json:"allow_transitional_parent_to_sign"`
	KeyLength                     int             `json:"key_length"`
	Duration                      int             `json:"duration"`
	Metadata                      json.RawMessage `json:"metadata"`
}

// regenerateCertificate is POST /api/v1/certificates/<id>/regenerate; a
// transitional version gives what the CA signs new versions trusting it.
func (s *Server) regenerateCertificate(w http.ResponseWriter, r *http.Request, c *auth.Caller) error {
	// The body is optional.
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return err
	}
	var req certificateRegenerateRequest
	if len(bytes.TrimSpace(body)) > 0 {
		r.Body = io.NopCloser(bytes.NewReader(body))
		if err := decode(r, &req); err != nil {
			return err
		}
	}
	vs, err := s.credential(r, c)
	if err != nil {
		return err
	}
	if req.SetAsTransitional && store.Transitional(vs) != nil {
		return credhub.Reject(credhub.TooManyTransitional)
	}
	v, err := s.regenerateVersion(r.Context(), c, vs[0].Name, regeneration{metadata: req.Metadata, transitional: req.SetAsTransitional,
		transitionalSigns: req.AllowTransitionalParentToSign, keyLength: req.KeyLength, duration: req.Duration})
	if err != nil {
		return err
	}
	if v.Transitional {
		if err := s.renewSigned(r.Context(), v.Name); err != nil {
			return err
		}
	}
	var params struct {
		KeyLength int `json:"key_length"`
		Duration  int `json:"duration"`
	}
	_ = json.Unmarshal(v.Parameters, &params)
	writeJSON(w, http.StatusOK, struct {
		view
		DurationOverridden bool `json:"duration_overridden"`
		DurationUsed       int  `json:"duration_used"`
		KeyLength          int  `json:"key_length"`
	}{viewOf(v), false, params.Duration, params.KeyLength})
	return nil
}

// updateTransitional is PUT /api/v1/certificates/<id>/update_transitional_version
// {"version": <version id> | "latest" | null}: that version becomes the
// transitional one (none with null), and what the CA signs gets new
// versions trusting accordingly. It answers the current and transitional
// versions, each ca its signer's alone.
func (s *Server) updateTransitional(w http.ResponseWriter, r *http.Request, c *auth.Caller) error {
	// The body is required: `null` (credhub curl without -d) is no
	// request to end a rotation.
	var req *struct {
		Version *string `json:"version"`
	}
	if err := decode(r, &req); err != nil {
		return err
	}
	if req == nil {
		return credhub.Reject(credhub.BadRequest)
	}
	vs, err := s.credential(r, c)
	if err != nil {
		return err
	}
	id := ""
	if req.Version != nil {
		id = *req.Version
		if id == "latest" {
			id = vs[0].ID
		}
		if !slices.ContainsFunc(vs, func(v store.Version) bool { return v.ID == id }) {
			return credhub.Reject(credhub.VersionMismatch)
		}
	}
	if err := s.Store.SetTransitional(r.Context(), vs[0].Name, id); err != nil {
		return err
	}
	if err := s.renewSigned(r.Context(), vs[0].Name); err != nil {
		return err
	}
	if vs, err = s.Store.Versions(r.Context(), vs[0].Name); err != nil {
		return err
	}
	out := []view{}
	for _, v := range store.Currents(vs) {
		out = append(out, plainViewOf(&v))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// certificateVersions is GET /api/v1/certificates/<id>/versions: every
// version, newest first, or with current=true the current and
// transitional ones.
func (s *Server) certificateVersions(w http.ResponseWriter, r *http.Request, c *auth.Caller) error {
	vs, err := s.credential(r, c)
	if err != nil {
		return err
	}
	current, err := currentParam(r)
	if err != nil {
		return err
	}
	if current {
		vs = store.Currents(vs)
	}
	out := make([]view, len(vs))
	for i := range vs {
		out[i] = viewOf(&vs[i])
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// createCertificateVersion is POST /api/v1/certificates/<id>/versions
// {"value": {"ca", "certificate", "private_key"}, "transitional": bool}:
// a version of the credential, set as PUT /api/v1/data sets one; a
// transitional one gives what the CA signs new versions trusting it.
func (s *Server) createCertificateVersion(w http.ResponseWriter, r *http.Request, c *auth.Caller) error {
	var req struct {
		Value        json.RawMessage `json:"value"`
		Transitional bool            `json:"transitional"`
	}
	if err := decode(r, &req); err != nil {
		return err
	}
	vs, err := s.credential(r, c)
	if err != nil {
		return err
	}
	if len(req.Value) == 0 || string(req.Value) == "null" {
		return credhub.Reject(credhub.MissingValue)
	}
	if req.Transitional && store.Transitional(vs) != nil {
		return credhub.Reject(credhub.TooManyTransitional)
	}
	value, caName, err := s.setValue(r.Context(), c, typeCertificate, req.Value)
	if err != nil {
		return err
	}
	v, err := s.Store.Write(r.Context(), vs[0].Name, func(*store.Version) (*store.Version, error) {
		return &store.Version{Type: typeCertificate, Value: value, CAName: caName, Transitional: req.Transitional}, nil
	})
	if err != nil {
		return err
	}
	if v.Transitional {
		if err := s.renewSigned(r.Context(), v.Name); err != nil {
			return err
		}
	}
	writeJSON(w, http.StatusOK, viewOf(v))
	return nil
}

// deleteCertificateVersion is DELETE
// /api/v1/certificates/<id>/versions/<version id>: that version is
// deleted, never the credential's last one, and answered; a transitional
// one's deletion gives what the CA signs new versions trusting the CA
// alone.
func (s *Server) deleteCertificateVersion(w http.ResponseWriter, r *http.Request, c *auth.Caller) error {
	vs, err := s.credential(r, c)
	if err != nil {
		return err
	}
	i := slices.IndexFunc(vs, func(v store.Version) bool { return v.ID == r.PathValue("version") })
	if i < 0 {
		return errNotFound
	}
	if len(vs) == 1 {
		return credhub.Reject(credhub.CannotDeleteLastVersion)
	}
	if err := s.Store.DeleteVersion(r.Context(), vs[i]); err != nil {
		return err
	}
	if vs[i].Transitional {
		if err := s.renewSigned(r.Context(), vs[i].Name); err != nil {
			return err
		}
	}
	writeJSON(w, http.StatusOK, viewOf(&vs[i]))
	return nil
}

// renewSigned gives each certificate CA caName signs a new version, its
// value unchanged, trusting besides its signer the CA's other version
// (CredHub's createNewChildVersions): a director's next deploy reads the
// new version, so instances come to trust both CAs, or the new one alone
// once the rotation ends.
func (s *Server) renewSigned(ctx context.Context, caName string) error {
	cas, err := s.Store.Versions(ctx, caName)
	if err != nil {
		return err
	}
	currents := store.Currents(cas)
	if len(currents) == 0 {
		return nil
	}
	active := currents[0]
	activePEM := certPEM(&active)
	transitionalPEM := ""
	if len(currents) > 1 {
		transitionalPEM = certPEM(&currents[1])
	}
	all, err := s.Store.All(ctx)
	if err != nil {
		return err
	}
	for _, child := range all {
		if child.Type != typeCertificate || !strings.EqualFold(child.CAName, caName) || strings.EqualFold(child.Name, caName) {
			continue
		}
		signer := ""
		if v := certInfoOf(&child).value; v.CA != nil {
			signer = strings.TrimSpace(*v.CA)
		}
		trusted := transitionalPEM
		if signer != strings.TrimSpace(activePEM) {
			trusted = ""
			if transitionalPEM != "" || active.Transitional {
				trusted = activePEM
			}
		}
		_, err := s.Store.Write(ctx, child.Name, func(*store.Version) (*store.Version, error) {
			return &store.Version{Type: child.Type, Value: child.Value, Metadata: child.Metadata, Parameters: child.Parameters,
				CAName: child.CAName, TrustedCA: trusted}, nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// certPEM is a certificate version's certificate PEM.
func certPEM(v *store.Version) string {
	if c := certInfoOf(v).value.Certificate; c != nil {
		return *c
	}
	return ""
}
