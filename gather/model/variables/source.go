package variables

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/bosh-injector/bosh-injector/gather/model/inputfile"
	"github.com/bosh-injector/bosh-injector/gather/model/yamlvalue"
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
// YAML Hash of name to value. Puts are kept in memory until Save writes the
// whole store once.
type FileSource struct {
	path string
	mem  *MapSource
	put  bool
}

// OpenFile reads the vars-store at path; a missing file is an empty store.
func OpenFile(ctx context.Context, path string) (*FileSource, error) {
	data, err := inputfile.Read(ctx, "--vars-store", path)
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

// Put implements Source; Save writes it.
func (s *FileSource) Put(name string, value any) error {
	s.put = true
	return s.mem.Put(name, value)
}

// Save writes the store when a value was put, replacing the file only once
// the new one is complete on disk (a full disk leaves the previous store
// whole), with mode 0600 (it holds secrets) whatever the previous mode was.
// A store that could not be read back (over inputfile.MaxInputSize) is not
// written.
func (s *FileSource) Save() error {
	if !s.put {
		return nil
	}
	data, err := yamlvalue.Marshal(s.mem.Values())
	if err != nil {
		return err
	}
	if len(data) > inputfile.MaxInputSize {
		return fmt.Errorf("--vars-store %s: the store would be %d bytes, more than the %d MiB it can be read back at; it is left as it was", s.path, len(data), inputfile.MaxInputSize>>20)
	}
	if err := writeFileAtomically(s.path, data); err != nil {
		return fmt.Errorf("--vars-store %s: %w; it is left as it was", s.path, err)
	}
	s.put = false
	return nil
}

// writeFileAtomically writes data to a new file beside path (the target
// of path when it is a symbolic link), syncs it and renames it over path.
func writeFileAtomically(path string, data []byte) error {
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real
	}
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".new-")
	if err != nil {
		return err
	}
	tmp := f.Name()
	err = f.Chmod(0o600)
	if err == nil {
		_, err = f.Write(data)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	// The rename itself survives a crash once the directory is synced.
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}
