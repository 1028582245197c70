// Package properties binds a job's manifest properties to its spec exactly
// as the BOSH director does: source selection, then spec declaration
// order with shape checks, spec defaults for nil, nil leaves kept, and keys
// sorted recursively except inside arrays. Binding sees `((vars))` as plain
// strings; interpolation comes after.
package properties

import (
	"fmt"
	"strings"

	"github.com/bosh-injector/bosh-injector/gather/model/jobspec"
	"github.com/bosh-injector/bosh-injector/gather/model/manifest"
	"github.com/bosh-injector/bosh-injector/gather/model/yamlvalue"
)

// RawSource is the raw property source of job in its instance group:
// the job's own `properties` when the key is present (even `{}`), else the
// deep merge of the global and instance-group properties.
func RawSource(m *manifest.Manifest, g *manifest.InstanceGroup, job *manifest.Job) (*yamlvalue.Map, error) {
	if job.HasProperties {
		if job.Properties == nil {
			return nil, fmt.Errorf("Property 'properties' value (nil) did not match the required type 'Hash'")
		}
		return job.Properties, nil
	}
	return DeepMerge(m.Properties, g.Properties), nil
}

// DeepMerge returns base with over merged in: Hashes merge recursively,
// anything else in over replaces. Neither argument is modified.
func DeepMerge(base, over *yamlvalue.Map) *yamlvalue.Map {
	out := yamlvalue.NewMap()
	if base != nil {
		out = yamlvalue.Clone(base).(*yamlvalue.Map)
	}
	for _, k := range over.Keys() {
		ov, _ := over.Get(k)
		bv, _ := out.Get(k)
		bm, bok := bv.(*yamlvalue.Map)
		om, ook := ov.(*yamlvalue.Map)
		if bok && ook {
			out.Set(k, DeepMerge(bm, om))
		} else {
			out.Set(k, yamlvalue.Clone(ov))
		}
	}
	return out
}

// Bind computes the job's bound properties B from its declared properties
// and the raw source. The result shares no storage with its inputs.
func Bind(spec []jobspec.Property, raw *yamlvalue.Map) (*yamlvalue.Map, error) {
	b := yamlvalue.NewMap()
	for _, p := range spec {
		parts := strings.Split(p.Name, ".")
		if err := shapeCheck(raw, p.Name, parts); err != nil {
			return nil, err
		}
		v, _ := Lookup(raw, parts)
		if v == nil {
			v = p.Default
		}
		v = yamlvalue.SortKeys(yamlvalue.Clone(v))
		if err := set(b, p.Name, parts, v); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// shapeCheck fails when a node on the way to name is reached but is not a
// Hash; a missing node ends the walk.
func shapeCheck(raw *yamlvalue.Map, name string, parts []string) error {
	var cur any = raw
	for _, k := range parts {
		if cur == nil {
			return nil
		}
		m, ok := cur.(*yamlvalue.Map)
		if !ok {
			return fmt.Errorf("Property '%s' expects a hash, but received '%s'", name, yamlvalue.RubyClass(cur))
		}
		cur, _ = m.Get(k)
	}
	return nil
}

// Lookup walks Hashes along the key path; found reports whether the whole
// path exists, which link properties need (an explicit null counts).
func Lookup(raw *yamlvalue.Map, parts []string) (v any, found bool) {
	var cur any = raw
	for _, k := range parts {
		m, ok := cur.(*yamlvalue.Map)
		if !ok || m == nil {
			return nil, false
		}
		if cur, ok = m.Get(k); !ok {
			return nil, false
		}
	}
	return cur, true
}

// set assigns v at the dotted name, creating intermediate Hashes in
// declaration order. The director crashes when an intermediate holds a
// non-Hash (a spec declaring `a` with a scalar default and `a.b`); that is
// reported as an error here.
func set(b *yamlvalue.Map, name string, parts []string, v any) error {
	cur := b
	for _, k := range parts[:len(parts)-1] {
		next, _ := cur.Get(k)
		if m, ok := next.(*yamlvalue.Map); ok {
			cur = m
			continue
		}
		if next != nil && next != false {
			return fmt.Errorf("Property '%s' cannot be set: its parent '%s' is a %s", name, k, yamlvalue.RubyClass(next))
		}
		// Ruby's `h[k] ||= {}` replaces nil and false.
		m := yamlvalue.NewMap()
		cur.Set(k, m)
		cur = m
	}
	cur.Set(parts[len(parts)-1], v)
	return nil
}

// SetPath assigns v at the dotted path in m, creating intermediate Hashes
// (link properties are nested this way).
func SetPath(m *yamlvalue.Map, name string, v any) error {
	return set(m, name, strings.Split(name, "."), v)
}
