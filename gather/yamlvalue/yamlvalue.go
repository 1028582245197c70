// Package yamlvalue is the value model shared by the BOSH deployment packages:
// YAML 1.1 documents held as nil, bool, int64, float64, string, []any and
// *Map. Map keeps insertion order like a Ruby Hash, so JSON handed to the
// Ruby renderer has the key order the director's Hashes would have.
// Manifests are typed as the BOSH CLI's go-yaml v2 reads them (Parse), job
// specs as the director's Psych does (ParsePsych).
package yamlvalue

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"

	"gopkg.in/yaml.v2"
)

// Map is an insertion-ordered string-keyed map. The zero value is empty and
// ready to use. Setting an existing key keeps its position, as in Ruby.
type Map struct {
	keys []string
	vals map[string]any
}

// NewMap returns an empty Map.
func NewMap() *Map { return &Map{} }

// Get returns the value of key k and whether the key exists.
func (m *Map) Get(k string) (any, bool) {
	if m == nil {
		return nil, false
	}
	v, ok := m.vals[k]
	return v, ok
}

// Has reports whether the key exists (its value may be nil).
func (m *Map) Has(k string) bool {
	_, ok := m.Get(k)
	return ok
}

// Set assigns v to k, appending k if it is new.
func (m *Map) Set(k string, v any) {
	if m.vals == nil {
		m.vals = map[string]any{}
	}
	if _, ok := m.vals[k]; !ok {
		m.keys = append(m.keys, k)
	}
	m.vals[k] = v
}

// Delete removes k and reports whether it existed.
func (m *Map) Delete(k string) bool {
	if _, ok := m.vals[k]; !ok {
		return false
	}
	delete(m.vals, k)
	for i, key := range m.keys {
		if key == k {
			m.keys = append(m.keys[:i:i], m.keys[i+1:]...)
			break
		}
	}
	return true
}

// Keys returns the keys in order. The caller must not modify the slice.
func (m *Map) Keys() []string {
	if m == nil {
		return nil
	}
	return m.keys
}

// Len is the number of keys.
func (m *Map) Len() int {
	if m == nil {
		return 0
	}
	return len(m.keys)
}

// MarshalJSON encodes the map as a JSON object in key order.
func (m *Map) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range m.Keys() {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, err := json.Marshal(k)
		if err != nil {
			return nil, err
		}
		b.Write(kb)
		b.WriteByte(':')
		vb, err := json.Marshal(m.vals[k])
		if err != nil {
			return nil, fmt.Errorf("key %q: %w", k, err)
		}
		b.Write(vb)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// MarshalYAML encodes the map as an ordered YAML mapping.
func (m *Map) MarshalYAML() (any, error) {
	ms := make(yaml.MapSlice, 0, m.Len())
	for _, k := range m.Keys() {
		ms = append(ms, yaml.MapItem{Key: k, Value: m.vals[k]})
	}
	return ms, nil
}

// UnmarshalJSON decodes a JSON object keeping key order, so values written
// as JSON (the renderer's input, stored Secrets) read back identically.
func (m *Map) UnmarshalJSON(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeJSON(dec)
	if err != nil {
		return err
	}
	got, ok := v.(*Map)
	if !ok {
		return fmt.Errorf("expected a JSON object, got %s", RubyClass(v))
	}
	*m = *got
	return nil
}

func decodeJSON(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			m := NewMap()
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				v, err := decodeJSON(dec)
				if err != nil {
					return nil, err
				}
				m.Set(kt.(string), v)
			}
			_, err := dec.Token()
			return m, err
		case '[':
			list := []any{}
			for dec.More() {
				v, err := decodeJSON(dec)
				if err != nil {
					return nil, err
				}
				list = append(list, v)
			}
			_, err := dec.Token()
			return list, err
		}
		return nil, fmt.Errorf("unexpected %v", t)
	case json.Number:
		if i, err := t.Int64(); err == nil {
			return i, nil
		}
		return t.Float64()
	default:
		return t, nil
	}
}

// ParseJSON decodes a JSON document into the value model, keeping key order.
func ParseJSON(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	return decodeJSON(dec)
}

// Parse reads one YAML 1.1 document as the BOSH CLI (go-yaml v2) types it,
// which is what a director receives for manifests: yes/no/on/off and y/n
// booleans, ~ and null as nil, 0777 octal, 1e3 a float, the bare word nil
// a string. An empty document is nil.
func Parse(data []byte) (any, error) { return parse(data, resolveV2) }

// keyString turns a YAML key into the string key JSON needs. Non-string keys
// (1, true) keep their YAML text; BOSH manifests use string keys.
func keyString(k any) string {
	switch t := k.(type) {
	case string:
		return t
	case nil:
		return ""
	default:
		return fmt.Sprint(t)
	}
}

// Marshal encodes a value as YAML, keeping map order.
func Marshal(v any) ([]byte, error) { return yaml.Marshal(v) }

// Clone deep-copies a value, so later edits of the copy (ops files,
// interpolation) never reach the original.
func Clone(v any) any {
	switch t := v.(type) {
	case *Map:
		if t == nil {
			return (*Map)(nil)
		}
		m := &Map{keys: make([]string, len(t.keys)), vals: make(map[string]any, len(t.vals))}
		copy(m.keys, t.keys)
		for k, val := range t.vals {
			m.vals[k] = Clone(val)
		}
		return m
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = Clone(e)
		}
		return out
	default:
		return t
	}
}

// Equal reports whether two values are deeply equal, map order ignored
// (as Ruby's Hash#==).
func Equal(a, b any) bool {
	switch x := a.(type) {
	case *Map:
		y, ok := b.(*Map)
		if !ok || x.Len() != y.Len() {
			return false
		}
		for _, k := range x.Keys() {
			yv, ok := y.Get(k)
			if !ok || !Equal(x.vals[k], yv) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !Equal(x[i], y[i]) {
				return false
			}
		}
		return true
	default:
		return a == b
	}
}

// RubyClass is the Ruby class name the director reports for a value in its
// error messages.
func RubyClass(v any) string {
	switch t := v.(type) {
	case nil:
		return "NilClass"
	case string:
		return "String"
	case int64, int:
		return "Integer"
	case float64:
		return "Float"
	case []any:
		return "Array"
	case *Map:
		return "Hash"
	case bool:
		if t {
			return "TrueClass"
		}
		return "FalseClass"
	default:
		return fmt.Sprintf("%T", v)
	}
}

// SortKeys returns a copy of v whose maps are sorted by key, recursively,
// except maps inside arrays, which the director leaves alone (§2.2 step 4).
func SortKeys(v any) any {
	m, ok := v.(*Map)
	if !ok {
		return v
	}
	keys := append([]string(nil), m.keys...)
	sort.Strings(keys)
	out := &Map{keys: keys, vals: make(map[string]any, len(keys))}
	for _, k := range keys {
		out.vals[k] = SortKeys(m.vals[k])
	}
	return out
}
