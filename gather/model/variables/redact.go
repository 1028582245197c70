package variables

import (
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/bosh-injector/bosh-injector/gather/model/yamlvalue"
)

// Redactor knows the variable values of a run (given, read from a store,
// generated) and takes them out of text bound for errors and logs: a
// group named `((c.private_key))` or a stemcell named after a vars-file
// value is reported without the value.
type Redactor struct {
	mu      sync.Mutex
	secrets map[string]bool
	// sorted holds secrets longest first (nil when stale), so a value is
	// replaced whole before its lines.
	sorted []string
}

// Redacted stands for a value in redacted text.
const Redacted = "<redacted>"

// Lengths below which a value, or a line of a multi-line value, is left in
// text: a short value ("z1", "true") is rarely a secret and would garble
// every message it occurs in.
const minSecret, minSecretLine = 6, 16

// Remember adds the strings in v (a variable's value, with its nested
// keys' values) to what is redacted.
func (r *Redactor) Remember(v any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var walk func(any)
	walk = func(v any) {
		switch t := v.(type) {
		case string:
			r.add(t)
		case []any:
			for _, e := range t {
				walk(e)
			}
		case *yamlvalue.Map:
			for _, k := range t.Keys() {
				e, _ := t.Get(k)
				walk(e)
			}
		}
	}
	walk(v)
}

func (r *Redactor) add(s string) {
	if r.secrets == nil {
		r.secrets = map[string]bool{}
	}
	forms := []string{s, strings.Trim(strconv.Quote(s), `"`)}
	if strings.Contains(s, "\n") {
		// Errors quote values partly or escaped: each long line alone.
		for _, line := range strings.Split(s, "\n") {
			forms = append(forms, strings.TrimSpace(line))
		}
	}
	for i, f := range forms {
		if (i < 2 && len(f) >= minSecret) || len(f) >= minSecretLine {
			if !r.secrets[f] {
				r.secrets[f] = true
				r.sorted = nil
			}
		}
	}
}

// Redact returns s with every remembered value replaced by Redacted.
func (r *Redactor) Redact(s string) string {
	if r == nil {
		return s
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.secrets) == 0 {
		return s
	}
	if r.sorted == nil {
		for s := range r.secrets {
			r.sorted = append(r.sorted, s)
		}
		slices.SortFunc(r.sorted, func(a, b string) int { return len(b) - len(a) })
	}
	// Not a strings.Replacer: it preprocesses each value in quadratic
	// time, and a value may be MiBs.
	for _, secret := range r.sorted {
		if len(secret) <= len(s) && strings.Contains(s, secret) {
			s = strings.ReplaceAll(s, secret, Redacted)
		}
	}
	return s
}

// Writer is w with every write redacted (a log line, an error).
func (r *Redactor) Writer(w io.Writer) io.Writer { return redactingWriter{r, w} }

type redactingWriter struct {
	r *Redactor
	w io.Writer
}

func (rw redactingWriter) Write(p []byte) (int, error) {
	rw.r.mu.Lock()
	none := len(rw.r.secrets) == 0
	rw.r.mu.Unlock()
	if none {
		// Most commands know no variable: their output passes as it is.
		return rw.w.Write(p)
	}
	if _, err := io.WriteString(rw.w, rw.r.Redact(string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Watch is src with every value read from it or put into it remembered.
func (r *Redactor) Watch(src Source) Source { return watched{src, r} }

type watched struct {
	src Source
	r   *Redactor
}

func (w watched) Get(name string) (any, bool, error) {
	v, found, err := w.src.Get(name)
	if found {
		w.r.Remember(v)
	}
	return v, found, err
}

func (w watched) Put(name string, value any) error {
	w.r.Remember(value)
	return w.src.Put(name, value)
}

// Describe implements Described with src's name.
func (w watched) Describe() string { return where(w.src) }
