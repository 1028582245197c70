// Package jobspec loads a BOSH job's spec with its templates, monit
// file and optional properties schema, from a release source tree
// (`jobs/<job>/spec`) or from the layout release images ship
// (`<jobs-dir>/<job>/job.MF`), and validates it as the director does at
// upload. Template contents are kept for the renderer.
package jobspec

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/bosh-injector/bosh-injector/gather/model/inputfile"
	"github.com/bosh-injector/bosh-injector/gather/model/yamlvalue"
)

// Spec is a job's spec with its files.
type Spec struct {
	Name        string
	Description string
	// Templates in spec order; every template is ERB.
	Templates []Template
	Packages  []string
	// Properties in declaration order (binding depends on it).
	Properties []Property
	Consumes   []Link
	Provides   []Link
	// Monit holds the monit file(s): "monit" and/or "*.monit", by name.
	Monit map[string]string
	// Schema is the job's properties_schema.json, nil when it has none.
	Schema *PropertiesSchema
}

// Template is one `templates` entry.
type Template struct {
	Source      string // key, relative to templates/
	Destination string // relative to the job root
	Content     string
}

// Property is a declared property.
type Property struct {
	Name string
	// Default is nil when absent or null.
	Default any
	Type    string
}

// Link is a consumes or provides entry.
type Link struct {
	Name, Type string
	Optional   bool
	// Properties are the dotted names a provides link exports.
	Properties []string
}

// IsErrand reports whether the job can run as an errand (has bin/run).
func (s *Spec) IsErrand() bool {
	for _, t := range s.Templates {
		if t.Destination == "bin/run" || t.Destination == "bin/run.ps1" {
			return true
		}
	}
	return false
}

// Property returns the declared property of that name, or nil.
func (s *Spec) Property(name string) *Property {
	for i := range s.Properties {
		if s.Properties[i].Name == name {
			return &s.Properties[i]
		}
	}
	return nil
}

// LoadSourceTree loads job from a release source tree (`jobs/<job>/spec`).
func LoadSourceTree(releaseDir, job string) (*Spec, error) {
	return load(releaseDir, filepath.Join("jobs", job), "spec", job)
}

// LoadImageLayout loads job from a release image's jobs directory
// (`<jobsDir>/<job>/job.MF`).
func LoadImageLayout(jobsDir, job string) (*Spec, error) {
	return load(jobsDir, job, "job.MF", job)
}

// load reads the job in dir (relative to release) through an os.Root on
// the release: no file of it, nor dir itself, is read through a symbolic
// link out of the release, and each is bounded in size (inputfile.ReadIn).
func load(release, dir, specFile, job string) (*Spec, error) {
	root, err := os.OpenRoot(release)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	read := func(name string) ([]byte, error) {
		data, err := inputfile.ReadIn(root, name)
		if err != nil {
			var pe *fs.PathError
			if errors.As(err, &pe) {
				err = pe.Err
			}
			return nil, &fs.PathError{Op: "read", Path: filepath.Join(release, name), Err: err}
		}
		return data, nil
	}
	file := filepath.Join(release, dir, specFile)
	data, err := read(filepath.Join(dir, specFile))
	if err != nil {
		return nil, err
	}
	s, err := Parse(data, job)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	for i := range s.Templates {
		content, err := read(filepath.Join(dir, "templates", filepath.FromSlash(s.Templates[i].Source)))
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%s: Missing template file '%s' for job '%s'", file, s.Templates[i].Source, job)
		}
		if err != nil {
			return nil, err
		}
		s.Templates[i].Content = string(content)
	}
	s.Monit = map[string]string{}
	f, err := root.Open(dir)
	if err != nil {
		return nil, err
	}
	entries, err := f.ReadDir(-1)
	f.Close()
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if e.Type().IsRegular() && (e.Name() == "monit" || strings.HasSuffix(e.Name(), ".monit")) {
			content, err := read(filepath.Join(dir, e.Name()))
			if err != nil {
				return nil, err
			}
			s.Monit[e.Name()] = string(content)
		}
	}
	if len(s.Monit) == 0 {
		return nil, fmt.Errorf("%s: Job '%s' is missing monit file", file, job)
	}
	schemaFile := filepath.Join(release, dir, SchemaFile)
	data, err = read(filepath.Join(dir, SchemaFile))
	switch {
	case err == nil:
		if s.Schema, err = CompileSchema(data); err != nil {
			return nil, fmt.Errorf("%s: %w", schemaFile, err)
		}
	case !errors.Is(err, os.ErrNotExist):
		return nil, err
	}
	return s, nil
}

// MonitNames returns the monit file names, "monit" first, then sorted.
func (s *Spec) MonitNames() []string {
	names := make([]string, 0, len(s.Monit))
	for n := range s.Monit {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool {
		if (names[i] == "monit") != (names[j] == "monit") {
			return names[i] == "monit"
		}
		return names[i] < names[j]
	})
	return names
}

// Parse reads and validates a spec document of job (without its files),
// typed as the director's Ruby reads it.
func Parse(data []byte, job string) (*Spec, error) {
	doc, err := yamlvalue.ParsePsych(data)
	if err != nil {
		return nil, err
	}
	root, ok := doc.(*yamlvalue.Map)
	if !ok {
		return nil, fmt.Errorf("Job '%s' spec is not a hash", job)
	}
	s := &Spec{}
	name, _ := root.Get("name")
	if s.Name, ok = name.(string); !ok || s.Name == "" {
		return nil, fmt.Errorf("Job '%s' spec has no name", job)
	}
	if s.Name != job {
		return nil, fmt.Errorf("Job '%s' spec names it '%s'", job, s.Name)
	}
	desc, _ := root.Get("description")
	s.Description, _ = desc.(string)

	if v, _ := root.Get("templates"); v != nil {
		tm, ok := v.(*yamlvalue.Map)
		if !ok {
			return nil, fmt.Errorf("Job '%s' has invalid templates spec format", job)
		}
		for _, src := range tm.Keys() {
			d, _ := tm.Get(src)
			dst, ok := d.(string)
			if !ok || dst == "" {
				return nil, fmt.Errorf("Job '%s' template '%s' has no destination", job, src)
			}
			if escapes(src) || escapes(dst) {
				return nil, fmt.Errorf("Job '%s' template '%s' -> '%s' escapes its directory", job, src, dst)
			}
			s.Templates = append(s.Templates, Template{Source: src, Destination: dst})
		}
	}
	if v, _ := root.Get("packages"); v != nil {
		list, ok := v.([]any)
		if !ok {
			return nil, fmt.Errorf("Job '%s' has invalid packages spec format", job)
		}
		for _, p := range list {
			ps, ok := p.(string)
			if !ok {
				return nil, fmt.Errorf("Job '%s' has invalid packages spec format", job)
			}
			s.Packages = append(s.Packages, ps)
		}
	}
	if v, _ := root.Get("properties"); v != nil {
		pm, ok := v.(*yamlvalue.Map)
		if !ok {
			return nil, fmt.Errorf("Job '%s' has invalid properties spec format", job)
		}
		for _, n := range pm.Keys() {
			def, _ := pm.Get(n)
			p := Property{Name: n}
			switch d := def.(type) {
			case nil: // the director crashes here; an empty definition is meant
			case *yamlvalue.Map:
				p.Default, _ = d.Get("default")
				t, _ := d.Get("type")
				p.Type, _ = t.(string)
			default:
				return nil, fmt.Errorf("Job '%s' has invalid properties spec format: property '%s' is not a hash", job, n)
			}
			s.Properties = append(s.Properties, p)
		}
	}
	if s.Consumes, err = links(root, job, "consumes"); err != nil {
		return nil, err
	}
	if s.Provides, err = links(root, job, "provides"); err != nil {
		return nil, err
	}
	return s, nil
}

// escapes says whether a template path is not a file inside the job's
// directory: absolute, the directory itself, above it, or holding a NUL.
func escapes(p string) bool {
	c := path.Clean(p)
	return path.IsAbs(p) || c == "." || c == ".." || strings.HasPrefix(c, "../") || strings.ContainsRune(p, 0)
}

func links(root *yamlvalue.Map, job, kind string) ([]Link, error) {
	v, _ := root.Get(kind)
	if v == nil {
		return nil, nil
	}
	list, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("Job '%s' has invalid %s spec format", job, kind)
	}
	var out []Link
	seen := map[string]bool{}
	for _, item := range list {
		m, ok := item.(*yamlvalue.Map)
		if !ok {
			return nil, fmt.Errorf("Job '%s' has invalid %s spec format", job, kind)
		}
		n, _ := m.Get("name")
		t, _ := m.Get("type")
		l := Link{}
		l.Name, _ = n.(string)
		l.Type, _ = t.(string)
		if l.Name == "" || l.Type == "" {
			return nil, fmt.Errorf("Job '%s' has a %s link without name or type", job, kind)
		}
		if opt, has := m.Get("optional"); has {
			if kind == "provides" {
				return nil, fmt.Errorf("Link '%s' of type '%s' is a provides link, not allowed to have 'optional' key", l.Name, l.Type)
			}
			l.Optional = opt == true
		}
		if props, _ := m.Get("properties"); props != nil {
			pl, ok := props.([]any)
			if !ok {
				return nil, fmt.Errorf("Job '%s' link '%s' has invalid properties format", job, l.Name)
			}
			for _, p := range pl {
				ps, ok := p.(string)
				if !ok {
					return nil, fmt.Errorf("Job '%s' link '%s' has invalid properties format", job, l.Name)
				}
				l.Properties = append(l.Properties, ps)
			}
		}
		if seen[l.Name] {
			return nil, fmt.Errorf("Job '%s' specifies duplicate %s link with name '%s'", job, kind, l.Name)
		}
		seen[l.Name] = true
		out = append(out, l)
	}
	return out, nil
}
