package director

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"

	"github.com/bosh-injector/bosh-injector/gather/model/variables"
	"github.com/bosh-injector/bosh-injector/gather/model/yamlvalue"
)

// Source is a deployment's variables on a config server, as a
// variables.Source that also generates (variables.Generating): what the
// director reads and generates for one deploy.
//
// Values are read at the version the deployment's variable set pins (by
// id), else the current one; every version read or generated is
// recorded in the set the deploy leaves (Set).
type Source struct {
	ctx        context.Context
	client     *Client
	director   string
	deployment string
	// pinned is the recorded variable set: full name to id.
	pinned map[string]string

	mu sync.Mutex
	// set is the variable set of this deploy: full name to id.
	set map[string]string
	// values are those read, by full name.
	values map[string]any
	// remember, when set, is told every value read.
	remember func(any)
}

// NewSource reads deployment's variables through c, named for director,
// at the ids of pinned (full name to id) where it has one.
func NewSource(ctx context.Context, c *Client, director, deployment string, pinned map[string]string) *Source {
	return &Source{ctx: ctx, client: c, director: director, deployment: deployment, pinned: pinned,
		set: map[string]string{}, values: map[string]any{}}
}

// Remember has every value read passed to f (a redactor's Remember) before
// it is used.
func (s *Source) Remember(f func(any)) { s.remember = f }

// FullName implements variables.Naming.
func (s *Source) FullName(name string) string { return Name(s.director, s.deployment, name) }

// Get implements variables.Source.
func (s *Source) Get(name string) (any, bool, error) {
	if err := ValidateName(name); err != nil {
		return nil, false, err
	}
	full := s.FullName(name)
	s.mu.Lock()
	v, ok := s.values[full]
	id, pinned := s.pinned[full]
	s.mu.Unlock()
	if ok {
		return v, true, nil
	}
	var cred *Credential
	var err error
	if pinned {
		cred, err = s.client.ByID(s.ctx, id)
	} else {
		cred, err = s.client.Current(s.ctx, full)
	}
	if NotFound(err) {
		what := fmt.Sprintf("'%s'", full)
		if pinned {
			what = fmt.Sprintf("'%s' with id '%s'", full, id)
		}
		return nil, false, &variables.Unfound{Message: fmt.Sprintf("Failed to find variable %s from config server: %v", what, err)}
	}
	if err != nil {
		return nil, false, err
	}
	return s.keep(full, cred)
}

// keep records cred as the deploy's version of full and returns its value.
func (s *Source) keep(full string, cred *Credential) (any, bool, error) {
	v, err := yamlvalue.ParseJSON(cred.Value)
	if err != nil {
		return nil, false, fmt.Errorf("the config server's value of '%s' is not JSON", full)
	}
	if s.remember != nil {
		s.remember(v)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.values[full] = v
	s.set[full] = cred.ID
	return v, true, nil
}

// Put implements variables.Source: it writes a new version, of type value
// for a string, json otherwise (as `credhub set` types them).
func (s *Source) Put(name string, value any) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	full := s.FullName(name)
	typ := "value"
	if _, ok := value.(string); !ok {
		typ = "json"
	}
	cred, err := s.client.Set(s.ctx, full, typ, value)
	if err != nil {
		return fmt.Errorf("Failed to set variable '%s' on config server: %v", full, err)
	}
	_, _, err = s.keep(full, cred)
	return err
}

// Import writes value as name's first version, of CredHub type typ, when
// the server has none: a deployment moving onto the server brings the
// values it had. It says whether it wrote one.
func (s *Source) Import(name, typ string, value any) (bool, error) {
	if err := ValidateName(name); err != nil {
		return false, err
	}
	full := s.FullName(name)
	if _, err := s.client.Current(s.ctx, full); !NotFound(err) {
		return false, err
	}
	// no-overwrite: what another writer stored meanwhile is kept.
	if _, err := s.client.set(s.ctx, full, typ, value, "no-overwrite"); err != nil {
		return false, fmt.Errorf("importing variable '%s' into the config server: %w", full, err)
	}
	return true, nil
}

// Generate implements variables.Generating, as the director's
// generate_values: a certificate's `ca` is named absolutely.
func (s *Source) Generate(name, typ string, parameters *yamlvalue.Map, mode string) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	full := s.FullName(name)
	s.mu.Lock()
	_, done := s.set[full]
	_, pinned := s.pinned[full]
	s.mu.Unlock()
	if done {
		return nil
	}
	if pinned {
		// A pinned variable is read at its id, never generated again.
		_, _, err := s.Get(name)
		return err
	}
	if ca, ok := parameters.Get("ca"); ok {
		if caName, ok := ca.(string); ok {
			parameters.Set("ca", s.FullName(caName))
		}
	}
	cred, err := s.client.Generate(s.ctx, GenerateRequest{Name: full, Type: typ, Parameters: parameters, Mode: mode})
	var answer *HTTPError
	if errors.As(err, &answer) {
		return fmt.Errorf("Config Server failed to generate value for '%s' with type '%s'. %v", full, typ, answer)
	}
	if err != nil {
		return err
	}
	_, _, err = s.keep(full, cred)
	return err
}

// Set is the deploy's variable set: full name to the id of each version
// read or generated.
func (s *Source) Set() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.set)
}
