package variables

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"

	"github.com/bosh-injector/bosh-injector/gather/inputfile"
	"github.com/bosh-injector/bosh-injector/gather/yamlvalue"
)

// MapSource is an in-memory Source.
type MapSource struct {
	mu   sync.Mutex
	vals *yamlvalue.Map
}

// NewMapSource returns a Source holding a copy of vals (may be nil).
func NewMapSource(vals *yamlvalue.Map) *MapSource {
	s := &MapSource{vals: yamlvalue.NewMap()}
	if vals != nil {
		s.vals = yamlvalue.Clone(vals).(*yamlvalue.Map)
	}
	return s
}

// Get implements Source.
func (s *MapSource) Get(name string) (any, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.vals.Get(name)
	return yamlvalue.Clone(v), ok, nil
}

// Put implements Source.
func (s *MapSource) Put(name string, value any) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.vals.Set(name, yamlvalue.Clone(value))
	return nil
}

// Values returns a copy of all values in insertion order.
func (s *MapSource) Values() *yamlvalue.Map {
	s.mu.Lock()
	defer s.mu.Unlock()
	return yamlvalue.Clone(s.vals).(*yamlvalue.Map)
}

// FileSource is a vars-store file as `bosh int --vars-store` keeps it: a
// YAML Hash of name to value, rewritten after every Put.
type FileSource struct {
	path string
	mem  *MapSource
}

// OpenFile reads the vars-store at path; a missing file is an empty store.
func OpenFile(path string) (*FileSource, error) {
	data, err := inputfile.Read("--vars-store", path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	doc, err := yamlvalue.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("vars store %s: %w", path, err)
	}
	var vals *yamlvalue.Map
	if doc != nil {
		m, ok := doc.(*yamlvalue.Map)
		if !ok {
			return nil, fmt.Errorf("vars store %s: expected a hash, got %s", path, yamlvalue.RubyClass(doc))
		}
		vals = m
	}
	return &FileSource{path: path, mem: NewMapSource(vals)}, nil
}

// Get implements Source.
func (s *FileSource) Get(name string) (any, bool, error) { return s.mem.Get(name) }

// Put implements Source, writing the whole store (mode 0600: it holds secrets).
func (s *FileSource) Put(name string, value any) error {
	if err := s.mem.Put(name, value); err != nil {
		return err
	}
	data, err := yamlvalue.Marshal(s.mem.Values())
	if err != nil {
		return err
	}
	return os.WriteFile(s.path, data, 0o600)
}
