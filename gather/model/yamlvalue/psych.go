package yamlvalue

import (
	"fmt"
	"math"
	"math/big"
	"regexp"
	"strconv"
	"strings"

	yaml3 "gopkg.in/yaml.v3"
)

// ParsePsych reads one YAML document the way the director's Ruby (Psych)
// types it: job specs, and manifests as the BOSH CLI printed them. It and
// Parse differ on plain scalars: Psych reads `y`/`n` and `1e3` as strings,
// go-yaml v2 as true/false and 1000.
func ParsePsych(data []byte) (any, error) { return parse(data, resolvePsych, psychTagged) }

// parse walks the YAML node tree (go-yaml v3 keeps order, anchors and
// styles) and types plain scalars with the given resolver. go-yaml v2 is not
// used to decode: it loses keys merged with `<<` when keeping order.
func parse(data []byte, resolve, tagged resolver) (any, error) {
	if err := CheckValues(data); err != nil {
		return nil, err
	}
	var doc yaml3.Node
	if err := yaml3.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	if doc.Kind == 0 {
		return nil, nil
	}
	w := walker{resolve: resolve, tagged: tagged, budget: maxValues, active: map[*yaml3.Node]bool{}}
	return w.walk(&doc)
}

// maxNodes bounds a document's values before yaml.v3 builds a node of
// each (about 200 bytes apiece): every value but the first follows one of
// the separators counted, so their count bounds the values. A 16 MiB flow
// sequence of 8M scalars is refused at once; the largest real manifests
// and vars stores have a few hundred thousand.
const maxNodes = 2 << 20

// CheckValues fails on a document that may hold more values than
// maxNodes; every YAML decoder of user input calls it first.
func CheckValues(data []byte) error {
	if n := separators(data); n > maxNodes {
		return fmt.Errorf("the document has %d value separators (commas, colons, dashes, brackets, lines), more than the %d it may have: it could hold more values than memory", n, maxNodes)
	}
	return nil
}

func separators(data []byte) int {
	n := 0
	for _, c := range data {
		switch c {
		case ',', ':', '-', '\n', '[', '{', '?':
			n++
		}
	}
	return n
}

// maxValues bounds the values a document may expand to through aliases
// (a "billion laughs" document), far above any real manifest.
const maxValues = 1 << 20

type resolver func(*yaml3.Node) (any, error)

// walker builds values from nodes, expanding aliases into copies.
type walker struct {
	resolve resolver
	// tagged, when set, types scalars with an explicit tag.
	tagged resolver
	budget int
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
		if w.tagged != nil && n.Style&yaml3.TaggedStyle != 0 {
			return w.tagged(n)
		}
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
	psychTime       = regexp.MustCompile(`^-?\d{4}-\d{1,2}-\d{1,2}(?:[Tt]|\s+)\d{1,2}:\d\d:\d\d(?:\.\d*)?(?:\s*(?:Z|[-+]\d{1,2}:?(?:\d\d)?))?$`)
	psychDate       = regexp.MustCompile(`^\d{4}-(?:1[012]|0\d|\d)-(?:[12]\d|3[01]|0\d|\d)$`)
	psychSexInt     = regexp.MustCompile(`^[-+]?[0-9][0-9_]*(:[0-5]?[0-9]){1,2}$`)
	psychSexFloat   = regexp.MustCompile(`^[-+]?[0-9][0-9_]*(:[0-5]?[0-9]){1,2}\.[0-9_]*$`)
	psychInteger    = regexp.MustCompile(`^(?:[-+]?0b[0-1_,]+|[-+]?0[0-7_,]+|[-+]?(?:0|[1-9](?:[0-9]|,[0-9]|_[0-9])*)|[-+]?0x[0-9a-fA-F_,]+)$`)
	psychFloat      = regexp.MustCompile(`^[-+]?([0-9][0-9_,]*)?\.[0-9]*([eE][-+][0-9]+)?$`)
	psychFloatDot   = regexp.MustCompile(`\.([Ee]|$)`)
	psychTrue       = regexp.MustCompile(`(?i)^(yes|true|on)$`)
	psychFalse      = regexp.MustCompile(`(?i)^(no|false|off)$`)
	psychNull       = regexp.MustCompile(`(?i)^null$`)
	digitSeparators = strings.NewReplacer(",", "", "_", "")
)

// resolvePsych follows Psych::ScalarScanner#tokenize (Psych 4 and 5) for
// plain scalars, as YAML.load calls it: Symbols are allowed, Date and Time
// are not (Psych raises DisallowedClass, and so do we).
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
	switch lower := strings.ToLower(s); {
	case psychTime.MatchString(s):
		return nil, fmt.Errorf("line %d: Tried to load unspecified class: Time (%q)", n.Line, s)
	case psychDate.MatchString(s):
		return nil, fmt.Errorf("line %d: Tried to load unspecified class: Date (%q)", n.Line, s)
	case lower == ".inf" || lower == "+.inf":
		return math.Inf(1), nil
	case lower == "-.inf":
		return math.Inf(-1), nil
	case lower == ".nan":
		return math.NaN(), nil
	case len(s) > 1 && s[0] == ':':
		return psychSymbol(s), nil
	case psychSexInt.MatchString(s):
		return sexagesimalInt(s), nil
	case psychSexFloat.MatchString(s):
		return sexagesimalFloat(s), nil
	case psychFloat.MatchString(s):
		if s == "." || s == "-." || s == "+." {
			return s, nil
		}
		text := psychFloatDot.ReplaceAllString(digitSeparators.Replace(s), "$1")
		f, err := strconv.ParseFloat(text, 64)
		if err != nil {
			return nil, fmt.Errorf("line %d: invalid value for Float(): %q", n.Line, text)
		}
		return f, nil
	case psychInteger.MatchString(s):
		return rubyInteger(digitSeparators.Replace(s)), nil
	}
	return s, nil
}

// psychSymbol is Psych's Symbol for :name, or for :"name" (and :'name'),
// whose unanchored /^:(["'])(.*)\1/ takes what lies up to the last
// matching quote, less one leading colon.
func psychSymbol(s string) Symbol {
	if q := s[1]; q == '"' || q == '\'' {
		if end := strings.LastIndexByte(s, q); end > 1 {
			return Symbol(strings.TrimPrefix(s[2:end], ":"))
		}
	}
	return Symbol(s[1:])
}

// psychTagged types a scalar with an explicit tag as Psych's ToRuby does,
// quoted or not: !!str is the text, !!float is Float() of the text typed as
// a plain scalar, !ruby/sym a Symbol; any other tag (!!int, !!bool, !!null,
// a local !tag) types the text as a plain scalar. !!binary keeps its text
// (Psych decodes it to a binary String, which templates do not get here).
func psychTagged(n *yaml3.Node) (any, error) {
	switch n.Tag {
	case "!!str", "!str", "!ruby/string", "!!binary", "!binary":
		return n.Value, nil
	case "!ruby/sym", "!ruby/symbol":
		return Symbol(n.Value), nil
	case "!!float", "!float":
		v, err := resolvePsych(n)
		if err != nil {
			return nil, err
		}
		switch t := v.(type) {
		case float64:
			return t, nil
		case int64:
			return float64(t), nil
		case BigInt:
			f, _ := strconv.ParseFloat(string(t), 64)
			return f, nil
		case string:
			if f, err := strconv.ParseFloat(t, 64); err == nil && !strings.ContainsAny(t, "xXpP_iInN") {
				return f, nil
			}
		}
		return nil, fmt.Errorf("line %d: invalid value for Float(): %q", n.Line, n.Value)
	}
	return resolvePsych(n)
}

// sexagesimalInt is Psych's reading of 1:30:00, including its quirk that
// two fields count as hours and minutes (1:30 is 5400).
func sexagesimalInt(s string) any {
	parts := strings.Split(s, ":")
	sum := new(big.Int)
	for i, p := range parts {
		n, _ := new(big.Int).SetString(strings.TrimPrefix(strings.ReplaceAll(p, "_", ""), "+"), 10)
		sum.Add(sum, n.Mul(n, new(big.Int).Exp(big.NewInt(60), big.NewInt(int64(abs(i-2))), nil)))
	}
	return Integer(sum)
}

// sexagesimalFloat is the Float form (1:30:00.5), summed left to right as
// Ruby does.
func sexagesimalFloat(s string) float64 {
	sum := 0.0
	for i, p := range strings.Split(s, ":") {
		f, _ := strconv.ParseFloat(strings.ReplaceAll(p, "_", ""), 64)
		sum += f * math.Pow(60, float64(abs(i-2)))
	}
	return sum
}

func abs(i int) int {
	if i < 0 {
		return -i
	}
	return i
}

// rubyInteger is Ruby's Integer(): 0x hex, 0b binary, leading-0 octal, of
// any size.
func rubyInteger(s string) any {
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
	i, ok := new(big.Int).SetString(body, base)
	if !ok {
		return s
	}
	if neg {
		i.Neg(i)
	}
	return Integer(i)
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
		// Beyond int64 go-yaml v2 reads a uint64, which the CLI writes
		// out in full: the director reads a Bignum.
		if u, err := strconv.ParseUint(plain, 0, 64); err == nil {
			return Integer(new(big.Int).SetUint64(u)), nil
		}
		if v2Float.MatchString(plain) {
			if f, err := strconv.ParseFloat(plain, 64); err == nil {
				return f, nil
			}
		}
	}
	return s, nil
}
