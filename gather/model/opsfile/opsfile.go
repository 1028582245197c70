// Package opsfile applies BOSH ops files as the BOSH CLI's go-patch does,
// to what the CLI applies them to: the values go-yaml v2 unmarshals into
// interface{} (map[interface{}]interface{}, []interface{}, scalars).
// `replace` and `remove` take paths of `/key`, `/0` (negative counts from
// the end), `/-` (append), `/name=value` (the one array item whose `name`
// is the string `value`), a `?` suffix making that segment and all later
// ones optional, and the array modifiers `:prev`, `:next`, `:before`,
// `:after`. Error texts are go-patch's.
package opsfile

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"gopkg.in/yaml.v2"

	"github.com/bosh-injector/bosh-injector/gather/model/yamlvalue"
)

// Op is one operation of an ops file.
type Op struct {
	Type  string // "replace" or "remove"
	Path  Pointer
	Value any // replace only
}

// definition is one operation as the CLI unmarshals it (go-patch's
// OpDefinition): Value is a pointer, so a YAML null reads as missing.
type definition struct {
	Type  string  `yaml:"type"`
	Path  *string `yaml:"path"`
	Value *any    `yaml:"value"`
}

// Parse reads an ops file with go-yaml v2, as the CLI does: a YAML list of
// {type, path, value}. Errors name the op index as the CLI does.
func Parse(data []byte) ([]Op, error) {
	var defs []definition
	if err := yamlvalue.CheckValues(data); err != nil {
		return nil, err
	}
	if err := yaml.Unmarshal(data, &defs); err != nil {
		return nil, err
	}
	ops := make([]Op, 0, len(defs))
	for i, def := range defs {
		kind := "Replace"
		switch def.Type {
		case "replace":
		case "remove":
			kind = "Remove"
		default:
			return nil, fmt.Errorf("Unknown operation [%d] with type '%s'", i, def.Type)
		}
		if def.Path == nil {
			return nil, fmt.Errorf("%s operation [%d]: Missing path", kind, i)
		}
		if kind == "Replace" && def.Value == nil {
			return nil, fmt.Errorf("%s operation [%d]: Missing value", kind, i)
		}
		if kind == "Remove" && def.Value != nil {
			return nil, fmt.Errorf("%s operation [%d]: Cannot specify value", kind, i)
		}
		ptr, err := NewPointer(*def.Path)
		if err != nil {
			return nil, fmt.Errorf("%s operation [%d]: Invalid path: %s", kind, i, err)
		}
		op := Op{Type: def.Type, Path: ptr}
		if def.Value != nil {
			op.Value = *def.Value
		}
		ops = append(ops, op)
	}
	return ops, nil
}

// Apply applies ops in order to a copy of doc and returns the result.
// An error names the failing op's index and path.
func Apply(doc any, ops []Op) (any, error) {
	doc = clone(doc)
	for i, op := range ops {
		var err error
		switch op.Type {
		case "replace":
			doc, err = replace(doc, op.Path, op.Value)
		case "remove":
			doc, err = remove(doc, op.Path)
		default:
			err = fmt.Errorf("Unknown operation with type '%s'", op.Type)
		}
		if err != nil {
			return nil, fmt.Errorf("operation [%d] (%s %s): %w", i, op.Type, op.Path, err)
		}
	}
	return doc, nil
}

// modifier is one of :prev, :next, :before, :after.
type modifier int

const (
	modPrev modifier = iota
	modNext
	modBefore
	modAfter
)

var modNames = map[string]modifier{"prev": modPrev, "next": modNext, "before": modBefore, "after": modAfter}

type tokenKind int

const (
	tokKey tokenKind = iota
	tokIndex
	tokAppend   // "-"
	tokMatching // name=value
)

type token struct {
	kind      tokenKind
	key       string // key, or the matching key
	value     string // matching value
	index     int
	optional  bool
	modifiers []modifier
}

// Pointer is a parsed ops path.
type Pointer struct {
	raw    string
	tokens []token
}

func (p Pointer) String() string { return p.raw }

// prefix renders the path up to and including token i, as go-patch does in
// its messages.
func (p Pointer) prefix(i int) string {
	var b strings.Builder
	optional := false
	for _, t := range p.tokens[:i+1] {
		b.WriteByte('/')
		switch t.kind {
		case tokAppend:
			b.WriteByte('-')
		case tokIndex:
			b.WriteString(strconv.Itoa(t.index))
		case tokKey:
			b.WriteString(encoder.Replace(t.key))
		case tokMatching:
			b.WriteString(encoder.Replace(t.key) + "=" + encoder.Replace(t.value))
		}
		if t.optional && !optional && t.kind != tokIndex {
			b.WriteByte('?')
			optional = true
		}
		for _, m := range t.modifiers {
			for name, v := range modNames {
				if v == m {
					b.WriteString(":" + name)
				}
			}
		}
	}
	return b.String()
}

var (
	decoder = strings.NewReplacer("~0", "~", "~1", "/", "~2", "?", "~3", "=", "~7", ":")
	encoder = strings.NewReplacer("~", "~0", "/", "~1", "?", "~2", "=", "~3", ":", "~7")
)

// maxSegments bounds an ops path: each segment may create a level of
// nesting the document keeps and every later step walks; real paths have
// a dozen.
const maxSegments = 256

// NewPointer parses an ops path.
func NewPointer(s string) (Pointer, error) {
	p := Pointer{raw: s}
	if s == "" {
		return p, nil
	}
	if !strings.HasPrefix(s, "/") {
		return Pointer{}, errors.New("Expected to start with '/'")
	}
	if n := strings.Count(s, "/"); n > maxSegments {
		return Pointer{}, fmt.Errorf("Expected at most %d path segments but found %d", maxSegments, n)
	}
	parts := strings.Split(s, "/")[1:]
	optional := false
	for i, part := range parts {
		last := i == len(parts)-1
		var mods []modifier
		pieces := strings.Split(part, ":")
		part = pieces[0]
		for _, m := range pieces[1:] {
			mod, ok := modNames[m]
			if !ok {
				return Pointer{}, fmt.Errorf("Expected to find one of the following modifiers: 'prev', 'next', 'before', or 'after' but found '%s'", pieces[1])
			}
			mods = append(mods, mod)
		}
		if last && part == "-" {
			if len(mods) > 0 {
				return Pointer{}, errors.New("Expected not to find any modifiers with after last index token")
			}
			p.tokens = append(p.tokens, token{kind: tokAppend})
			continue
		}
		if idx, err := strconv.Atoi(part); err == nil {
			p.tokens = append(p.tokens, token{kind: tokIndex, index: idx, modifiers: mods})
			continue
		}
		if strings.HasSuffix(part, "?") {
			optional = true
			part = strings.TrimSuffix(part, "?")
		}
		if k, v, ok := strings.Cut(part, "="); ok {
			p.tokens = append(p.tokens, token{kind: tokMatching, key: decoder.Replace(k), value: decoder.Replace(v), optional: optional, modifiers: mods})
			continue
		}
		if len(mods) > 0 {
			return Pointer{}, errors.New("Expected not to find any modifiers with key token")
		}
		p.tokens = append(p.tokens, token{kind: tokKey, key: decoder.Replace(part), optional: optional})
	}
	return p, nil
}

// clone deep-copies a document, so that applying ops leaves the input alone.
func clone(v any) any {
	switch t := v.(type) {
	case map[any]any:
		out := make(map[any]any, len(t))
		for k, e := range t {
			out[k] = clone(e)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = clone(e)
		}
		return out
	default:
		return t
	}
}

func arrayMismatch(p Pointer, i int, obj any) error {
	return fmt.Errorf("Expected to find an array at path '%s' but found '%T'", p.prefix(i), obj)
}

func mapMismatch(p Pointer, i int, obj any) error {
	return fmt.Errorf("Expected to find a map at path '%s' but found '%T'", p.prefix(i), obj)
}

// missingKey lists the map's string keys, sorted, as go-patch does.
func missingKey(p Pointer, i int, m map[any]any) error {
	siblings := "found no other map keys"
	var keys []string
	for k := range m {
		if s, ok := k.(string); ok {
			keys = append(keys, s)
		}
	}
	if len(keys) > 0 {
		sort.Strings(keys)
		siblings = "found map keys: '" + strings.Join(keys, "', '") + "'"
	}
	return fmt.Errorf("Expected to find a map key '%s' for path '%s' (%s)", p.tokens[i].key, p.prefix(i), siblings)
}

func missingIndex(p Pointer, i, idx int, arr []any) error {
	return fmt.Errorf("Expected to find array index '%d' but found array of length '%d' for path '%s'", idx, len(arr), p.prefix(i))
}

// concreteIndex resolves an index with :prev/:next (negative indexes count
// from the end), and reports whether :before/:after asks for an insertion.
func concreteIndex(p Pointer, i, idx int, mods []modifier, arr []any) (int, bool, error) {
	before, after := false, false
	for _, m := range mods {
		if before || after {
			return 0, false, errors.New("Expected to not find any modifiers after 'before' or 'after' modifier")
		}
		switch m {
		case modPrev:
			idx--
		case modNext:
			idx++
		case modBefore:
			before = true
		case modAfter:
			after = true
		}
	}
	if idx >= len(arr) || -idx-1 >= len(arr) {
		return 0, false, missingIndex(p, i, idx, arr)
	}
	if idx < 0 {
		idx += len(arr)
	}
	if after {
		idx++
	}
	return idx, before || after, nil
}

func matching(p Pointer, i int, arr []any) ([]int, error) {
	t := p.tokens[i]
	var idxs []int
	for n, item := range arr {
		if m, ok := item.(map[any]any); ok {
			if m[t.key] == t.value {
				idxs = append(idxs, n)
			}
		}
	}
	if len(idxs) != 1 && !(t.optional && len(idxs) == 0) {
		return nil, fmt.Errorf("Expected to find exactly one matching array item for path '%s' but found %d", p.prefix(i), len(idxs))
	}
	return idxs, nil
}

func insertAt(arr []any, idx int, v any) []any {
	out := make([]any, 0, len(arr)+1)
	out = append(out, arr[:idx]...)
	out = append(out, v)
	return append(out, arr[idx:]...)
}

// replace walks the path, creating optional missing keys, and sets the value.
func replace(doc any, p Pointer, value any) (any, error) {
	if len(p.tokens) == 0 {
		return clone(value), nil
	}
	set := func(v any) { doc = v }
	obj := doc
	for i, t := range p.tokens {
		last := i == len(p.tokens)-1
		switch t.kind {
		case tokIndex, tokMatching, tokAppend:
			arr, ok := obj.([]any)
			if !ok {
				return nil, arrayMismatch(p, i, obj)
			}
			idx := t.index
			if t.kind == tokAppend {
				if !last {
					return nil, fmt.Errorf("Expected after last index token to be last in path '%s'", p)
				}
				set(append(arr, clone(value)))
				return doc, nil
			}
			if t.kind == tokMatching {
				idxs, err := matching(p, i, arr)
				if err != nil {
					return nil, err
				}
				if len(idxs) == 0 {
					// Optional and absent: append the value, or a new item
					// carrying the matched key to descend into.
					if last {
						set(append(arr, clone(value)))
						return doc, nil
					}
					item := map[any]any{t.key: t.value}
					arr = append(arr, item)
					set(arr)
					obj = item
					continue
				}
				idx = idxs[0]
			}
			n, insert, err := concreteIndex(p, i, idx, t.modifiers, arr)
			if err != nil {
				return nil, err
			}
			if last {
				if insert {
					set(insertAt(arr, n, clone(value)))
				} else {
					arr[n] = clone(value)
				}
				return doc, nil
			}
			if insert {
				return nil, fmt.Errorf("Expected to find key, matching index or after last index token at path '%s'", p.prefix(i+1))
			}
			obj = arr[n]
			set = func(v any) { arr[n] = v }
		case tokKey:
			m, ok := obj.(map[any]any)
			if !ok {
				return nil, mapMismatch(p, i, obj)
			}
			next, found := m[t.key]
			if !found && !t.optional {
				return nil, missingKey(p, i, m)
			}
			if last {
				m[t.key] = clone(value)
				return doc, nil
			}
			if !found {
				switch p.tokens[i+1].kind {
				case tokAppend, tokMatching:
					next = []any{}
				case tokKey:
					next = map[any]any{}
				default:
					return nil, fmt.Errorf("Expected to find key, matching index or after last index token at path '%s'", p.prefix(i+1))
				}
				m[t.key] = next
			}
			obj = next
			key := t.key
			set = func(v any) { m[key] = v }
		}
	}
	return doc, nil
}

// remove walks the path and deletes its last element; a missing optional
// segment leaves the document unchanged.
func remove(doc any, p Pointer) (any, error) {
	if len(p.tokens) == 0 {
		return nil, errors.New("Cannot remove entire document")
	}
	set := func(v any) { doc = v }
	obj := doc
	for i, t := range p.tokens {
		last := i == len(p.tokens)-1
		switch t.kind {
		case tokIndex, tokMatching:
			arr, ok := obj.([]any)
			if !ok {
				return nil, arrayMismatch(p, i, obj)
			}
			idx := t.index
			if t.kind == tokMatching {
				idxs, err := matching(p, i, arr)
				if err != nil {
					return nil, err
				}
				if len(idxs) == 0 {
					return doc, nil
				}
				idx = idxs[0]
			}
			n, insert, err := concreteIndex(p, i, idx, t.modifiers, arr)
			if err != nil {
				return nil, err
			}
			if insert {
				return nil, errors.New("Expected not to find 'before' or 'after' modifiers in a remove path")
			}
			if last {
				out := append(append([]any{}, arr[:n]...), arr[n+1:]...)
				set(out)
				return doc, nil
			}
			obj = arr[n]
			set = func(v any) { arr[n] = v }
		case tokAppend:
			return nil, fmt.Errorf("Expected not to find after last index token in path '%s'", p)
		case tokKey:
			m, ok := obj.(map[any]any)
			if !ok {
				return nil, mapMismatch(p, i, obj)
			}
			next, found := m[t.key]
			if !found {
				if t.optional {
					return doc, nil
				}
				return nil, missingKey(p, i, m)
			}
			if last {
				delete(m, t.key)
				return doc, nil
			}
			obj = next
			key := t.key
			set = func(v any) { m[key] = v }
		}
	}
	return doc, nil
}
