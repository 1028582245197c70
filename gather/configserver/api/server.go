// Package api serves CredHub's HTTP API (cloudfoundry/credhub's
// CredentialsController, RegenerateController, CertificatesController,
// InfoController and HealthController) over the store, with CredHub's
// JSON shapes, status codes and error texts, and UAA's token endpoints
// from package auth beside it, so a BOSH director or the credhub CLI
// talks to it as to CredHub.
//
// A caller outside its scope gets the same 404 as for a missing
// credential, so names it may not use cannot be probed. Logs name the
// caller, method, path and status; never a body, a value or a token.
package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/go-logr/logr"

	"github.com/bosh-injector/bosh-injector/gather/configserver/auth"
	"github.com/bosh-injector/bosh-injector/gather/configserver/credhub"
	"github.com/bosh-injector/bosh-injector/gather/configserver/store"
)

// Server is the API over a store.
type Server struct {
	Store *store.Store
	Auth  *auth.Authenticator
	// AuthServerURL is /info's auth-server.url; empty takes
	// https://<request host>, the server itself.
	AuthServerURL string
	Log           logr.Logger
}

// maxBody bounds request bodies; CredHub's values are at most 64 KB.
const maxBody = 1 << 20

// Version is the CredHub release whose API this server follows; the
// credhub CLI reads it at login to choose its requests.
const Version = "2.15.20"

// Handler routes CredHub's and UAA's endpoints.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /info", s.info)
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "UP"})
	})
	mux.HandleFunc("POST /oauth/token", s.Auth.ServeToken)
	mux.HandleFunc("GET /token_keys", s.Auth.ServeKeys)
	mux.HandleFunc("GET /token_key", s.Auth.ServeKey)
	mux.HandleFunc("DELETE /oauth/token/revoke/{jti}", s.Auth.ServeRevoke)
	mux.Handle("GET /version", s.authed("", func(w http.ResponseWriter, _ *http.Request, _ *auth.Caller) error {
		writeJSON(w, http.StatusOK, map[string]string{"version": Version})
		return nil
	}))
	mux.Handle("GET /api/v1/data", s.authed(auth.ScopeRead, s.get))
	mux.Handle("GET /api/v1/data/{id}", s.authed(auth.ScopeRead, s.getByID))
	mux.Handle("PUT /api/v1/data", s.authed(auth.ScopeWrite, s.set))
	mux.Handle("POST /api/v1/data", s.authed(auth.ScopeWrite, s.generate))
	mux.Handle("DELETE /api/v1/data", s.authed(auth.ScopeWrite, s.delete))
	mux.Handle("POST /api/v1/regenerate", s.authed(auth.ScopeWrite, s.regenerate))
	mux.Handle("POST /api/v1/bulk-regenerate", s.authed(auth.ScopeWrite, s.bulkRegenerate))
	mux.Handle("GET /api/v1/certificates", s.authed(auth.ScopeRead, s.certificates))
	mux.Handle("POST /api/v1/certificates/{id}/regenerate", s.authed(auth.ScopeWrite, s.regenerateCertificate))
	mux.Handle("PUT /api/v1/certificates/{id}/update_transitional_version", s.authed(auth.ScopeWrite, s.updateTransitional))
	mux.Handle("GET /api/v1/certificates/{id}/versions", s.authed(auth.ScopeRead, s.certificateVersions))
	mux.Handle("POST /api/v1/certificates/{id}/versions", s.authed(auth.ScopeWrite, s.createCertificateVersion))
	mux.Handle("DELETE /api/v1/certificates/{id}/versions/{version}", s.authed(auth.ScopeWrite, s.deleteCertificateVersion))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// CredHub ignores a trailing slash (the CLI asks for
		// /api/v1/certificates/).
		if p := strings.TrimRight(r.URL.Path, "/"); p != r.URL.Path && p != "" {
			r.URL.Path, r.URL.RawPath = p, ""
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxBody)
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		start := time.Now()
		mux.ServeHTTP(rec, r)
		s.Log.V(1).Info("request", "method", r.Method, "path", r.URL.Path, "status", rec.status,
			"caller", rec.caller, "duration", time.Since(start).String())
	})
}

type statusRecorder struct {
	http.ResponseWriter
	status int
	caller string
}

func (r *statusRecorder) WriteHeader(status int) {
	r.status = status
	r.ResponseWriter.WriteHeader(status)
}

// info is CredHub's /info.
func (s *Server) info(w http.ResponseWriter, r *http.Request) {
	u := s.AuthServerURL
	if u == "" {
		u = "https://" + r.Host
	}
	writeJSON(w, http.StatusOK, map[string]any{"auth-server": map[string]string{"url": u}, "app": map[string]string{"name": "CredHub"}})
}

// handler is an endpoint for an authenticated caller; an error becomes
// CredHub's answer (see fail).
type handler func(w http.ResponseWriter, r *http.Request, c *auth.Caller) error

// authed authenticates the request and demands scope, if any. CredHub itself
// wants both scopes for every endpoint and leaves the rest to its
// permissions; here credhub.read reads and credhub.write writes.
func (s *Server) authed(scope string, h handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		caller, failure := s.Auth.Authenticate(r)
		if failure != nil {
			failure.Write(w)
			return
		}
		if rec, ok := w.(*statusRecorder); ok {
			rec.caller = caller.Who
		}
		if (scope == auth.ScopeRead && !caller.Read) || (scope == auth.ScopeWrite && !caller.Write) {
			writeJSON(w, http.StatusForbidden, map[string]string{"error": "insufficient_scope",
				"error_description": "The token lacks the scope " + scope + " this request needs."})
			return
		}
		if err := h(w, r, caller); err != nil {
			s.fail(w, r, caller, err)
		}
	})
}

// httpError is an answer with a status and a CredHub message.
type httpError struct {
	status  int
	message string
}

func (e *httpError) Error() string { return e.message }

var (
	errNotFound   = &httpError{http.StatusNotFound, credhub.ResourceNotFound}
	errCANotFound = &httpError{http.StatusNotFound, credhub.CANotFound}
)

// fail answers with err: CredHub's 400 or 404 for the errors it names, its
// 500 text for anything else, which is logged (errors here never carry
// values).
func (s *Server) fail(w http.ResponseWriter, r *http.Request, c *auth.Caller, err error) {
	var he *httpError
	var invalid *credhub.Invalid
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &he):
		writeError(w, he.status, he.message)
	case errors.As(err, &invalid):
		writeError(w, http.StatusBadRequest, invalid.Message)
	case errors.As(err, &tooBig):
		writeError(w, http.StatusRequestEntityTooLarge, credhub.ExceedsMaximumSize)
	default:
		s.Log.Error(err, "request failed", "method", r.Method, "path", r.URL.Path, "caller", c.Who)
		writeError(w, http.StatusInternalServerError, credhub.InternalServerError)
	}
}

func writeError(w http.ResponseWriter, status int, message string) {
	writeJSON(w, status, map[string]string{"error": message})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// decode reads a JSON body strictly, as CredHub's mapper fails on unknown
// properties, with its messages.
func decode(r *http.Request, v any) error {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	var tooBig *http.MaxBytesError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &tooBig):
		return err
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return credhub.Reject(credhub.InvalidJSONKey(strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)))
	default:
		return credhub.Reject(credhub.BadRequest)
	}
}

// absolute is a name with CredHub's leading slash.
func absolute(name string) string {
	if strings.HasPrefix(name, "/") {
		return name
	}
	return "/" + name
}
