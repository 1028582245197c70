// Package yamlvalue is the value model shared by the BOSH deployment packages:
// YAML 1.1 documents held as nil, bool, int64, BigInt, float64 (±Inf and NaN
// included), string, Symbol, []any and *Map, one Go type per Ruby class the
// director's Psych builds. Map keeps insertion order like a Ruby Hash, so
// the renderer's Hashes have the key order the director's would have.
// Variable files are typed as the BOSH CLI's go-yaml v2 reads them (Parse);
// job specs, and manifests once the CLI has printed them (package boshcli),
// as the director's Psych does (ParsePsych).
package yamlvalue

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"sort"
	"strconv"
	"strings"

	"gopkg.in/yaml.v2"
)

// Symbol is a Ruby Symbol, which Psych builds from a plain scalar `:name`.
type Symbol string

// BigInt is an Integer beyond int64 (a Ruby Bignum), in decimal. Integer
// makes one, so an int64-sized value is never a BigInt.
type BigInt string

// Integer returns i as the model holds it: int64 when it fits, else BigInt.
func Integer(i *big.Int) any {
	if i.IsInt64() {
		return i.Int64()
	}
	return BigInt(i.String())
}

// MarshalYAML writes the number itself (go-yaml v2 would quote the text).
func (b BigInt) MarshalYAML() (any, error) {
	if u, err := strconv.ParseUint(string(b), 10, 64); err == nil {
		return u, nil
	}
	f, _, err := big.ParseFloat(string(b), 10, 64, big.ToNearestEven)
	if err != nil {
		return nil, err
	}
	v, _ := f.Float64()
	return v, nil
}

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

// MarshalJSON encodes the map as a JSON object in key order, each value in
// a form that reads back as the same type (see appendJSON).
func (m *Map) MarshalJSON() ([]byte, error) {
	return appendJSON(nil, m)
}

// rubyKey marks a JSON object standing for a value JSON has no form for:
// {"\u0000": [class, text]} is the Float ±Infinity or NaN, or a Symbol. A
// Hash whose only key is "\u0000" is wrapped as {"\u0000": ["Hash", {...}]}
// so the encoding stays unambiguous.
const rubyKey = "\x00"

// appendJSON encodes v so that ParseJSON returns an equal value of the same
// types: a Float always has a fraction or exponent (1.0, 1e+21), an Integer
// never does, whatever its size.
func appendJSON(b []byte, v any) ([]byte, error) {
	switch t := v.(type) {
	case nil:
		return append(b, "null"...), nil
	case bool:
		return strconv.AppendBool(b, t), nil
	case int64:
		return strconv.AppendInt(b, t, 10), nil
	case int:
		return strconv.AppendInt(b, int64(t), 10), nil
	case BigInt:
		return append(b, t...), nil
	case float64:
		switch {
		case math.IsInf(t, 1):
			return appendTagged(b, "Float", "Infinity")
		case math.IsInf(t, -1):
			return appendTagged(b, "Float", "-Infinity")
		case math.IsNaN(t):
			return appendTagged(b, "Float", "NaN")
		}
		n := len(b)
		b = strconv.AppendFloat(b, t, 'g', -1, 64)
		if !bytes.ContainsAny(b[n:], ".e") {
			b = append(b, ".0"...)
		}
		return b, nil
	case Symbol:
		return appendTagged(b, "Symbol", string(t))
	case []any:
		b = append(b, '[')
		for i, e := range t {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = appendJSON(b, e); err != nil {
				return nil, err
			}
		}
		return append(b, ']'), nil
	case *Map:
		if t.Len() == 1 && t.keys[0] == rubyKey {
			b = append(b, `{"\u0000":["Hash",`...)
			b, err := appendObject(b, t)
			if err != nil {
				return nil, err
			}
			return append(b, "]}"...), nil
		}
		return appendObject(b, t)
	default:
		data, err := json.Marshal(v)
		return append(b, data...), err
	}
}

func appendObject(b []byte, m *Map) ([]byte, error) {
	b = append(b, '{')
	for i, k := range m.Keys() {
		if i > 0 {
			b = append(b, ',')
		}
		kb, err := json.Marshal(k)
		if err != nil {
			return nil, err
		}
		b = append(append(b, kb...), ':')
		if b, err = appendJSON(b, m.vals[k]); err != nil {
			return nil, fmt.Errorf("key %q: %w", k, err)
		}
	}
	return append(b, '}'), nil
}

func appendTagged(b []byte, class, text string) ([]byte, error) {
	tb, err := json.Marshal(text)
	if err != nil {
		return nil, err
	}
	b = append(b, `{"\u0000":["`...)
	b = append(b, class...)
	b = append(b, `",`...)
	b = append(b, tb...)
	return append(b, "]}"...), nil
}

// decodeObject reads an object's members after its '{'. tags says whether
// a sole "\u0000" key marks an encoded value (see rubyKey).
func decodeObject(dec *json.Decoder, tags bool) (any, error) {
	m := NewMap()
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return nil, err
		}
		var v any
		if tags && m.Len() == 0 && kt == rubyKey {
			v, err = decodeTagged(dec)
		} else {
			v, err = decodeJSON(dec)
		}
		if err != nil {
			return nil, err
		}
		m.Set(kt.(string), v)
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	if tv, ok := m.vals[rubyKey].(tagged); ok {
		if m.Len() != 1 {
			return nil, fmt.Errorf("an encoded %s shares its object with other keys", tv.class)
		}
		return tv.v, nil
	}
	return m, nil
}

// tagged is a decoded [class, text] pair until its object is known to hold
// nothing else.
type tagged struct {
	class string
	v     any
}

// decodeTagged reads what appendTagged and the Hash wrapping wrote.
func decodeTagged(dec *json.Decoder) (any, error) {
	if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
		return nil, fmt.Errorf("encoded value: expected [class, value], got %v %v", tok, err)
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	class, _ := tok.(string)
	var v any
	switch class {
	case "Hash":
		if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
			return nil, fmt.Errorf("encoded Hash: expected an object, got %v %v", tok, err)
		}
		v, err = decodeObject(dec, false)
	case "Symbol", "Float":
		tok, err = dec.Token()
		text, _ := tok.(string)
		switch {
		case err != nil:
		case class == "Symbol":
			v = Symbol(text)
		case text == "Infinity":
			v = math.Inf(1)
		case text == "-Infinity":
			v = math.Inf(-1)
		case text == "NaN":
			v = math.NaN()
		default:
			err = fmt.Errorf("unknown encoded Float %q", text)
		}
	default:
		err = fmt.Errorf("unknown encoded class %v", tok)
	}
	if err != nil {
		return nil, err
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim(']') {
		return nil, fmt.Errorf("encoded %s: expected ], got %v %v", class, tok, err)
	}
	return tagged{class, v}, nil
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
			return decodeObject(dec, true)
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
		if strings.ContainsAny(string(t), ".eE") {
			return t.Float64()
		}
		i, ok := new(big.Int).SetString(string(t), 10)
		if !ok {
			return nil, fmt.Errorf("invalid number %s", t)
		}
		return Integer(i), nil
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
// which is how variable files are read: yes/no/on/off and y/n
// booleans, ~ and null as nil, 0777 octal, 1e3 a float, the bare word nil
// a string. An empty document is nil.
func Parse(data []byte) (any, error) { return parse(data, resolveV2, nil) }

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

// ShallowCopy returns a copy of m whose nested values are m's own, for
// edits of m's top level that must not reach m.
func (m *Map) ShallowCopy() *Map {
	out := &Map{keys: append([]string(nil), m.keys...), vals: make(map[string]any, len(m.vals))}
	for k, v := range m.vals {
		out.vals[k] = v
	}
	return out
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
	case int64, int, BigInt:
		return "Integer"
	case Symbol:
		return "Symbol"
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
// except maps inside arrays, which the director leaves alone.
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
