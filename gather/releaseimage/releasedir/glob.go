package releasedir

import (
	"fmt"
	"path"
	"strings"
)

// pattern is a package spec's file glob as bosh-cli matches it
// (doublestar): `**` as a whole path segment matches any number of
// directories, `*`, `?` and `[...]` match within a segment, `{a,b}` matches
// either alternative.
type pattern struct {
	text string
	// alternatives are the glob with its braces expanded, each split into
	// path segments.
	alternatives [][]string
}

func compile(glob string) (pattern, error) {
	expanded, err := expandBraces(glob)
	if err != nil {
		return pattern{}, fmt.Errorf("glob '%s': %w", glob, err)
	}
	p := pattern{text: glob}
	for _, e := range expanded {
		segs := strings.Split(path.Clean(e), "/")
		for _, s := range segs {
			if s != "**" {
				// path.Match reports a malformed pattern only when it
				// reaches it: try every segment once.
				if _, err := path.Match(s, ""); err != nil {
					return pattern{}, fmt.Errorf("glob '%s': %w", glob, err)
				}
			}
		}
		p.alternatives = append(p.alternatives, segs)
	}
	return p, nil
}

// match says whether the slash-separated relative path name matches.
func (p pattern) match(name string) bool {
	segs := strings.Split(name, "/")
	for _, alt := range p.alternatives {
		if matchSegments(alt, segs) {
			return true
		}
	}
	return false
}

func matchSegments(pat, name []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			for skip := 0; skip <= len(name); skip++ {
				if matchSegments(pat[1:], name[skip:]) {
					return true
				}
			}
			return false
		}
		if len(name) == 0 {
			return false
		}
		if ok, _ := path.Match(pat[0], name[0]); !ok {
			return false
		}
		pat, name = pat[1:], name[1:]
	}
	return len(name) == 0
}

// expandBraces expands `{a,b}` alternations (nested too) into every glob
// they stand for; a backslash escapes the next character.
func expandBraces(glob string) ([]string, error) {
	open := -1
	depth := 0
	for i := 0; i < len(glob); i++ {
		switch glob[i] {
		case '\\':
			i++
		case '{':
			if depth == 0 {
				open = i
			}
			depth++
		case '}':
			if depth == 0 {
				return nil, fmt.Errorf("unmatched '}'")
			}
			depth--
			if depth > 0 {
				continue
			}
			var out []string
			for _, alt := range splitAlternatives(glob[open+1 : i]) {
				rest, err := expandBraces(glob[:open] + alt + glob[i+1:])
				if err != nil {
					return nil, err
				}
				out = append(out, rest...)
			}
			return out, nil
		}
	}
	if depth > 0 {
		return nil, fmt.Errorf("unmatched '{'")
	}
	return []string{glob}, nil
}

// splitAlternatives splits a brace's body at its top-level commas.
func splitAlternatives(body string) []string {
	var out []string
	depth, start := 0, 0
	for i := 0; i < len(body); i++ {
		switch body[i] {
		case '\\':
			i++
		case '{':
			depth++
		case '}':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, body[start:i])
				start = i + 1
			}
		}
	}
	return append(out, body[start:])
}
