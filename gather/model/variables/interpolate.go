// Package variables resolves `((name))` placeholders in the yamlvalue model
// as the BOSH director does, reading values from a Source, and
// generates missing values of the BOSH variable types password,
// certificate, rsa and ssh, never replacing a value that exists.
package variables

import (
	"cmp"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/bosh-injector/bosh-injector/gather/model/yamlvalue"
)

// Source holds variable values by name (without the `((…))` and the legacy
// leading `!`). Get reports found=false for a missing variable.
type Source interface {
	Get(name string) (value any, found bool, err error)
	Put(name string, value any) error
}

// Renewing is a Source that tells the values it generated itself from those
// a user gave, and replaces the former: a generated certificate whose CA
// was regenerated is signed again by the new CA.
type Renewing interface {
	Generated(name string) bool
	Replace(name string, value any) error
}

// Described is a Source that names itself in errors, as the director names
// its config server.
type Described interface {
	Describe() string
}

const configServer = "config server"

// Unfound is a Source's answer for a variable it does not hold, in its own
// words (a config server's names the variable's full name and the server's
// answer): interpolation reports it as it is.
type Unfound struct{ Message string }

func (e *Unfound) Error() string { return e.Message }

// Naming is a Source that knows variables by fuller names than the
// manifest's, as a config server knows "/<director>/<deployment>/<name>":
// errors name them so.
type Naming interface {
	FullName(name string) string
}

// where names src in errors.
func where(src Source) string {
	if d, ok := src.(Described); ok {
		return d.Describe()
	}
	return configServer
}

// placeholder matches one `((name))`; the CLI tolerates one space inside.
var placeholder = regexp.MustCompile(`\(\( ?(!?[-/.\w]+) ?\)\)`)

// wholePlaceholder matches a value that is exactly one placeholder.
var wholePlaceholder = regexp.MustCompile(`^\(\( ?(!?[-/.\w]+) ?\)\)$`)

// Interpolate returns a copy of v with every placeholder replaced. A value
// (or Hash key) that is exactly one placeholder takes the variable's value
// with its type; placeholders inside longer strings need String or Integer
// values. All failures are collected, one "- …" line each, as the director.
func Interpolate(v any, src Source) (any, error) {
	in := interpolator{src: src, cache: map[string]fetched{}, budget: maxInterpolated}
	out := in.walk(v)
	if len(in.errs) > 0 {
		return nil, &listError{text: strings.Join(in.errs, "\n"), causes: in.causes}
	}
	return out, nil
}

// listError is the "- …" lines of an interpolation; it unwraps to the
// sources' own errors, so a caller can tell a server that could not be
// reached (and retry) from a variable that is wrong.
type listError struct {
	text   string
	causes []error
}

func (e *listError) Error() string   { return e.text }
func (e *listError) Unwrap() []error { return e.causes }

// Placeholders lists the variable names (top-level name, `!` stripped)
// referenced in v, each once, in order of appearance.
func Placeholders(v any) []string {
	var names []string
	seen := map[string]bool{}
	var walk func(any)
	add := func(s string) {
		for _, m := range placeholder.FindAllStringSubmatch(s, -1) {
			n, _, _ := strings.Cut(strings.TrimPrefix(m[1], "!"), ".")
			if !seen[n] {
				seen[n] = true
				names = append(names, n)
			}
		}
	}
	walk = func(v any) {
		switch t := v.(type) {
		case string:
			add(t)
		case []any:
			for _, e := range t {
				walk(e)
			}
		case *yamlvalue.Map:
			for _, k := range t.Keys() {
				add(k)
				e, _ := t.Get(k)
				walk(e)
			}
		}
	}
	walk(v)
	return names
}

type fetched struct {
	v   any
	err string
	// size is v's share of the interpolation budget.
	size int
}

type interpolator struct {
	src   Source
	cache map[string]fetched
	errs  []string
	// causes are the sources' errors behind errs.
	causes []error
	// budget is what the values substituted may still add (see spend).
	budget int
}

// maxInterpolated bounds what substitution adds to a document, in bytes
// of strings and 16 per value: a value is copied at every reference, so
// 2000 references to a 1 MiB string, or 600 to a list of 200k items, would
// otherwise fill memory. Real manifests add a few MiB.
const maxInterpolated = 128 << 20

// spend takes size from the budget, or records (once) that ref would
// exceed it and refuses.
func (in *interpolator) spend(ref string, size int) bool {
	if in.budget < 0 {
		return false
	}
	if in.budget -= size; in.budget < 0 {
		in.errs = append(in.errs, fmt.Sprintf("- Failed to substitute variable '((%s))': the values substituted would add more than the %d MiB a manifest may grow by", ref, maxInterpolated>>20))
		return false
	}
	return true
}

// sizeOf is v's size for the budget.
func sizeOf(v any) int {
	switch t := v.(type) {
	case string:
		return 16 + len(t)
	case []any:
		n := 16
		for _, e := range t {
			n += sizeOf(e)
		}
		return n
	case *yamlvalue.Map:
		n := 16
		for _, k := range t.Keys() {
			e, _ := t.Get(k)
			n += len(k) + sizeOf(e)
		}
		return n
	default:
		return 16
	}
}

func (in *interpolator) walk(v any) any {
	switch t := v.(type) {
	case string:
		return in.str(t)
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = in.walk(e)
		}
		return out
	case *yamlvalue.Map:
		out := yamlvalue.NewMap()
		for _, k := range t.Keys() {
			e, _ := t.Get(k)
			key := k
			switch nk := in.str(k).(type) {
			case string:
				key = nk
			case int64:
				key = strconv.FormatInt(nk, 10)
			case yamlvalue.BigInt:
				key = string(nk)
			default:
				in.errs = append(in.errs, fmt.Sprintf("- Failed to substitute variable: Can not replace '%s' in hash key. The value should be a String or an Integer.", k))
			}
			out.Set(key, in.walk(e))
		}
		return out
	default:
		return v
	}
}

func (in *interpolator) str(s string) any {
	if !strings.Contains(s, "((") {
		return s
	}
	if m := wholePlaceholder.FindStringSubmatch(s); m != nil {
		v, ok := in.fetch(m[1])
		if !ok || !in.spend(m[1], in.cache[strings.TrimPrefix(m[1], "!")].size) {
			return s
		}
		return yamlvalue.Clone(v)
	}
	// The string's growth is spent before it is built.
	size, first := 0, ""
	for _, m := range placeholder.FindAllStringSubmatch(s, -1) {
		if _, ok := in.fetch(m[1]); ok {
			size += in.cache[strings.TrimPrefix(m[1], "!")].size
			first = cmp.Or(first, m[1])
		}
	}
	if size > 0 && !in.spend(first, size) {
		return s
	}
	return placeholder.ReplaceAllStringFunc(s, func(ph string) string {
		name := placeholder.FindStringSubmatch(ph)[1]
		v, ok := in.fetch(name)
		if !ok {
			return ph
		}
		switch t := v.(type) {
		case string:
			return t
		case int64:
			return strconv.FormatInt(t, 10)
		case yamlvalue.BigInt:
			return string(t)
		}
		in.errs = append(in.errs, fmt.Sprintf("- Failed to substitute variable: Can not replace '%s' in '%s'. The value should be a String or an Integer.", ph, s))
		return ph
	})
}

// fetch resolves `name.key.sub`, recording an error once per placeholder.
func (in *interpolator) fetch(ref string) (any, bool) {
	ref = strings.TrimPrefix(ref, "!")
	if f, ok := in.cache[ref]; ok {
		return f.v, f.err == ""
	}
	v, err := lookup(in.src, ref)
	f := fetched{v: v, size: sizeOf(v)}
	if err != nil {
		f.err = err.Error()
		in.errs = append(in.errs, "- "+f.err)
		if cause := errors.Unwrap(err); cause != nil {
			in.causes = append(in.causes, cause)
		}
	}
	in.cache[ref] = f
	return f.v, f.err == ""
}

// lookup fetches a variable and indexes into it along dotted keys.
func lookup(src Source, ref string) (any, error) {
	parts := strings.Split(ref, ".")
	from := where(src)
	v, found, err := src.Get(parts[0])
	var unfound *Unfound
	if errors.As(err, &unfound) {
		return nil, unfound
	}
	if n, ok := src.(Naming); ok {
		parts[0] = n.FullName(parts[0])
	}
	if err != nil {
		return nil, fmt.Errorf("Failed to fetch variable '%s' from %s: %w", parts[0], from, err)
	}
	if !found {
		return nil, fmt.Errorf("Failed to find variable '%s' from %s", parts[0], from)
	}
	parent := parts[0]
	for _, key := range parts[1:] {
		m, ok := v.(*yamlvalue.Map)
		if !ok {
			return nil, fmt.Errorf("Failed to fetch variable '%s' from %s: Expected parent '%s' to be a hash", parts[0], from, parent)
		}
		next, ok := m.Get(key)
		if !ok {
			return nil, fmt.Errorf("Failed to fetch variable '%s' from %s: Expected parent '%s' hash to have key '%s'", parts[0], from, parent, key)
		}
		v = next
		parent += "." + key
	}
	return v, nil
}
