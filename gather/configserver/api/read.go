package api

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/bosh-injector/bosh-injector/gather/configserver/auth"
	"github.com/bosh-injector/bosh-injector/gather/configserver/credhub"
	"github.com/bosh-injector/bosh-injector/gather/configserver/store"
)

// get is GET /api/v1/data: by name (all versions, versions=N or
// current=true), by path or by name-like.
func (s *Server) get(w http.ResponseWriter, r *http.Request, c *auth.Caller) error {
	q := r.URL.Query()
	switch {
	case q.Has("path"):
		p := strings.ToLower(absolute(q.Get("path")))
		if !strings.HasSuffix(p, "/") {
			p += "/"
		}
		return s.find(w, r, c, func(name string) bool { return strings.HasPrefix(strings.ToLower(name), p) })
	case q.Has("name-like"):
		like := strings.ToLower(q.Get("name-like"))
		return s.find(w, r, c, func(name string) bool { return strings.Contains(strings.ToLower(name), like) })
	}
	name := q.Get("name")
	if name == "" {
		return credhub.Reject(credhub.MissingQueryParameter("name"))
	}
	current, err := currentParam(r)
	if err != nil {
		return err
	}
	n := -1
	if v := q.Get("versions"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			return credhub.Reject(credhub.BadRequest)
		}
		if current {
			return credhub.Reject(credhub.CantUseVersionsAndCurrent)
		}
		if n < 0 {
			return credhub.Reject(credhub.InvalidQueryParameter("versions"))
		}
	}
	name = absolute(name)
	if !c.May(name) {
		return errNotFound
	}
	vs, err := s.Store.Versions(r.Context(), name)
	if err != nil {
		return err
	}
	if current {
		vs = store.Currents(vs)
	}
	if n >= 0 && n < len(vs) {
		vs = vs[:n]
	}
	// The stored name's case may differ from the asked one's.
	if len(vs) == 0 || !c.May(vs[0].Name) {
		return errNotFound
	}
	data := make([]view, len(vs))
	for i := range vs {
		data[i] = viewOf(&vs[i])
	}
	writeJSON(w, http.StatusOK, map[string]any{"data": data})
	return nil
}

// currentParam is the request's query parameter current (false when
// absent).
func currentParam(r *http.Request) (bool, error) {
	v := r.URL.Query().Get("current")
	if v == "" {
		return false, nil
	}
	current, err := strconv.ParseBool(v)
	if err != nil {
		return false, credhub.Reject(credhub.BadRequest)
	}
	return current, nil
}

// find answers a path or name-like search: each matching credential the
// caller may see, newest first.
func (s *Server) find(w http.ResponseWriter, r *http.Request, c *auth.Caller, match func(string) bool) error {
	all, err := s.Store.All(r.Context())
	if err != nil {
		return err
	}
	results := []findResult{}
	for _, v := range all {
		if c.May(v.Name) && match(v.Name) {
			results = append(results, findResult{VersionCreatedAt: instant(v.Created), Name: v.Name})
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"credentials": results})
	return nil
}

// getByID is GET /api/v1/data/<id>: one version, unwrapped.
func (s *Server) getByID(w http.ResponseWriter, r *http.Request, c *auth.Caller) error {
	v, err := s.Store.ByID(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	if v == nil || !c.May(v.Name) {
		return errNotFound
	}
	writeJSON(w, http.StatusOK, viewOf(v))
	return nil
}
