package yamlvalue

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	yaml3 "gopkg.in/yaml.v3"
)

// ParsePsych reads one YAML document the way the director's Ruby (Psych)
// types it. Job specs reach the director untouched and are read this way;
// manifests pass through the BOSH CLI's go-yaml v2 first, so Parse is right
// for them. The two differ on plain scalars: Psych reads `y`/`n` and `1e3`
// as strings, go-yaml v2 as true/false and 1000.
func ParsePsych(data []byte) (any, error) { return parse(data, resolvePsych) }

// parse walks the YAML node tree (go-yaml v3 keeps order, anchors and
// styles) and types plain scalars with the given resolver. go-yaml v2 is not
// used to decode: it loses keys merged with `<<` when keeping order.
func parse(data []byte, resolve resolver) (any, error) {
	var doc yaml3.Node
	if err := yaml3.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	if doc.Kind == 0 {
		return nil, nil
	}
	w := walker{resolve: resolve, budget: maxValues, active: map[*yaml3.Node]bool{}}
	return w.walk(&doc)
}

// maxValues bounds the values a document may expand to through aliases
// (a "billion laughs" document), far above any real manifest.
const maxValues = 1 << 20

type resolver func(*yaml3.Node) (any, error)

// walker builds values from nodes, expanding aliases into copies.
type walker struct {
	resolve resolver
	budget  int
	// active holds the anchored nodes being built, to refuse an alias to
	// its own ancestor.
	active map[*yaml3.Node]bool
}

func (w *walker) walk(n *yaml3.Node) (any, error) {
	if w.budget--; w.budget < 0 {
		return nil, fmt.Errorf("line %d: document expands to too many values through aliases", n.Line)
	}
	if n.Anchor != "" {
		if w.active[n] {
			return nil, fmt.Errorf("line %d: anchor &%s is used inside itself", n.Line, n.Anchor)
		}
		w.active[n] = true
		defer delete(w.active, n)
	}
	switch n.Kind {
	case yaml3.DocumentNode:
		if len(n.Content) == 0 {
			return nil, nil
		}
		return w.walk(n.Content[0])
	case yaml3.AliasNode:
		return w.walk(n.Alias)
	case yaml3.SequenceNode:
		out := make([]any, 0, len(n.Content))
		for _, c := range n.Content {
			v, err := w.walk(c)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	case yaml3.MappingNode:
		m := NewMap()
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, vn := n.Content[i], n.Content[i+1]
			v, err := w.walk(vn)
			if err != nil {
				return nil, err
			}
			if k.Kind == yaml3.ScalarNode && k.Tag == "!!merge" {
				if err := merge(m, v, k.Line); err != nil {
					return nil, err
				}
				continue
			}
			kv, err := w.walk(k)
			if err != nil {
				return nil, err
			}
			m.Set(keyString(kv), v)
		}
		return m, nil
	case yaml3.ScalarNode:
		if n.Style&(yaml3.DoubleQuotedStyle|yaml3.SingleQuotedStyle|yaml3.LiteralStyle|yaml3.FoldedStyle) != 0 ||
			(n.Style&yaml3.TaggedStyle != 0 && n.Tag == "!!str") {
			return n.Value, nil
		}
		return w.resolve(n)
	}
	return nil, fmt.Errorf("line %d: unsupported YAML node", n.Line)
}

// merge applies a `<<` merge key as Psych does: the merged Hash overwrites
// keys set before it; of a list of Hashes, the first wins.
func merge(m *Map, v any, line int) error {
	sources := []any{v}
	if list, ok := v.([]any); ok {
		sources = list
	}
	merged := NewMap()
	for i := len(sources) - 1; i >= 0; i-- {
		sm, ok := sources[i].(*Map)
		if !ok {
			return fmt.Errorf("line %d: merge key needs a hash", line)
		}
		for _, k := range sm.Keys() {
			sv, _ := sm.Get(k)
			merged.Set(k, Clone(sv))
		}
	}
	for _, k := range merged.Keys() {
		sv, _ := merged.Get(k)
		m.Set(k, sv)
	}
	return nil
}

var (
	psychStringLike = regexp.MustCompile(`^[^\d.:-]?[[:alpha:]_\s!@#$%^&*(){}<>|/\\~;=]+`)
	psychInteger    = regexp.MustCompile(`^(?:[-+]?0b[0-1_,]+|[-+]?0[0-7_,]+|[-+]?(?:0|[1-9](?:[0-9]|,[0-9]|_[0-9])*)|[-+]?0x[0-9a-fA-F_,]+)$`)
	psychFloat      = regexp.MustCompile(`^(?:[-+]?([0-9][0-9_,]*)?\.[0-9]*([eE][-+][0-9]+)?|[-+]?\.(inf|Inf|INF)|\.(nan|NaN|NAN))$`)
	psychTrue       = regexp.MustCompile(`(?i)^(yes|true|on)$`)
	psychFalse      = regexp.MustCompile(`(?i)^(no|false|off)$`)
	psychNull       = regexp.MustCompile(`(?i)^null$`)
)

// resolvePsych follows Psych::ScalarScanner#tokenize for plain scalars.
func resolvePsych(n *yaml3.Node) (any, error) {
	s := n.Value
	if s == "" {
		return nil, nil
	}
	if psychStringLike.MatchString(s) || strings.Contains(s, "\n") {
		if len(s) > 5 || !strings.ContainsAny(strings.ToLower(s[:1]), "ytonf~") {
			return s, nil
		}
		switch {
		case s == "~" || psychNull.MatchString(s):
			return nil, nil
		case psychTrue.MatchString(s):
			return true, nil
		case psychFalse.MatchString(s):
			return false, nil
		}
		return s, nil
	}
	if s == "~" {
		return nil, nil
	}
	switch strings.ToLower(s) {
	case ".inf", "+.inf":
		return math.Inf(1), nil
	case "-.inf":
		return math.Inf(-1), nil
	case ".nan":
		return math.NaN(), nil
	}
	if psychFloat.MatchString(s) {
		f, err := strconv.ParseFloat(strings.NewReplacer(",", "", "_", "").Replace(s), 64)
		if err == nil {
			return f, nil
		}
	}
	if psychInteger.MatchString(s) {
		return rubyInteger(strings.NewReplacer(",", "", "_", "").Replace(s))
	}
	return s, nil
}

// rubyInteger is Ruby's Integer(): 0x hex, 0b binary, leading-0 octal.
func rubyInteger(s string) (any, error) {
	neg := strings.HasPrefix(s, "-")
	body := strings.TrimLeft(s, "+-")
	base := 10
	switch {
	case strings.HasPrefix(body, "0x"):
		base, body = 16, body[2:]
	case strings.HasPrefix(body, "0b"):
		base, body = 2, body[2:]
	case len(body) > 1 && body[0] == '0':
		base, body = 8, body[1:]
	}
	i, err := strconv.ParseInt(body, base, 64)
	if err != nil {
		// Beyond int64: Ruby has bignums; keep the text.
		return s, nil
	}
	if neg {
		i = -i
	}
	return i, nil
}

var (
	v2Bool  = map[string]bool{"y": true, "Y": true, "yes": true, "Yes": true, "YES": true, "true": true, "True": true, "TRUE": true, "on": true, "On": true, "ON": true, "n": false, "N": false, "no": false, "No": false, "NO": false, "false": false, "False": false, "FALSE": false, "off": false, "Off": false, "OFF": false}
	v2Float = regexp.MustCompile(`^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`)
)

// resolveV2 follows go-yaml v2's resolve() for plain scalars.
func resolveV2(n *yaml3.Node) (any, error) {
	s := n.Value
	switch s {
	case "", "~", "null", "Null", "NULL":
		return nil, nil
	case ".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF":
		return math.Inf(1), nil
	case "-.inf", "-.Inf", "-.INF":
		return math.Inf(-1), nil
	case ".nan", ".NaN", ".NAN":
		return math.NaN(), nil
	}
	if b, ok := v2Bool[s]; ok {
		return b, nil
	}
	c := s[0]
	if c == '+' || c == '-' || c == '.' || (c >= '0' && c <= '9') {
		plain := strings.ReplaceAll(s, "_", "")
		if i, err := strconv.ParseInt(plain, 0, 64); err == nil {
			return i, nil
		}
		if u, err := strconv.ParseUint(plain, 0, 64); err == nil {
			return float64(u), nil
		}
		if v2Float.MatchString(plain) {
			if f, err := strconv.ParseFloat(plain, 64); err == nil {
				return f, nil
			}
		}
	}
	return s, nil
}
