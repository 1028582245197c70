package yamlvalue

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
)

func TestYAML11Typing(t *testing.T) {
	// Manifests: go-yaml v2 (the BOSH CLI's reading). Specs: Psych.
	tests := []struct{ in, v2, psych string }{
		{`[yes, no, on, off, Yes, OFF, true, FALSE]`, `[true,false,true,false,true,false,true,false]`, `[true,false,true,false,true,false,true,false]`},
		{`[y, n]`, `[true,false]`, `["y","n"]`},
		{`[~, null, Null, ""]`, `[null,null,null,""]`, `[null,null,null,""]`},
		{`[0777, 0x1F, 0b101, 1_000, -5]`, `[511,31,5,1000,-5]`, `[511,31,5,1000,-5]`},
		{`[1.5, 1e3, 1.0e+3, .5]`, `[1.5,1000,1000,0.5]`, `[1.5,"1e3",1000,0.5]`},
		{`[nil, "yes", '1', abc]`, `["nil","yes","1","abc"]`, `["nil","yes","1","abc"]`},
		{`{b: 1, a: {d: 2, c: 3}}`, `{"b":1,"a":{"d":2,"c":3}}`, `{"b":1,"a":{"d":2,"c":3}}`},
		{`{base: &b {x: 1, w: 2}, c: {<<: *b, w: 3}, d: {w: 3, <<: *b}}`, `{"base":{"x":1,"w":2},"c":{"x":1,"w":3},"d":{"w":2,"x":1}}`, `{"base":{"x":1,"w":2},"c":{"x":1,"w":3},"d":{"w":2,"x":1}}`},
		// go-yaml v2 reads the key y as true (the CLI then writes `true:`).
		{`{y: 1}`, `{"true":1}`, `{"y":1}`},
		{`[[{b: 1, a: 2}]]`, `[[{"b":1,"a":2}]]`, `[[{"b":1,"a":2}]]`},
		{`7`, `7`, `7`},
		{``, `null`, `null`},
	}
	for _, tc := range tests {
		for _, p := range []struct {
			name  string
			parse func([]byte) (any, error)
			want  string
		}{{"v2", Parse, tc.v2}, {"psych", ParsePsych, tc.psych}} {
			v, err := p.parse([]byte(tc.in))
			if err != nil {
				t.Errorf("%s %s: %v", p.name, tc.in, err)
				continue
			}
			js, err := json.Marshal(v)
			if err != nil {
				t.Errorf("%s %s: %v", p.name, tc.in, err)
				continue
			}
			if string(js) != p.want {
				t.Errorf("%s %s: got %s, want %s", p.name, tc.in, js, p.want)
			}
		}
	}
}

func TestMapOrderAndJSONRoundTrip(t *testing.T) {
	v, _ := Parse([]byte(`{z: 1, a: [ {q: 1, b: 2} ], m: {w: null, x: 1.5}}`))
	js, _ := json.Marshal(v)
	back, err := ParseJSON(js)
	if err != nil {
		t.Fatal(err)
	}
	js2, _ := json.Marshal(back)
	if string(js) != string(js2) || string(js) != `{"z":1,"a":[{"q":1,"b":2}],"m":{"w":null,"x":1.5}}` {
		t.Fatalf("%s vs %s", js, js2)
	}
	if !Equal(v, back) {
		t.Fatal("not equal after round trip")
	}
	var m Map
	if err := json.Unmarshal(js, &m); err != nil || m.Keys()[0] != "z" {
		t.Fatalf("UnmarshalJSON: %v %v", err, m.Keys())
	}
	sorted, _ := json.Marshal(SortKeys(v))
	if string(sorted) != `{"a":[{"q":1,"b":2}],"m":{"w":null,"x":1.5},"z":1}` {
		t.Fatalf("sorted %s", sorted)
	}
	mm := v.(*Map)
	mm.Set("z", 2)
	mm.Delete("a")
	mm.Set("a", 0)
	js3, _ := json.Marshal(mm)
	if string(js3) != `{"z":2,"m":{"w":null,"x":1.5},"a":0}` {
		t.Fatalf("edit order %s", js3)
	}
}

func TestRubyClass(t *testing.T) {
	for v, want := range map[any]string{nil: "NilClass", "s": "String", int64(1): "Integer", 1.5: "Float", true: "TrueClass", false: "FalseClass"} {
		if got := RubyClass(v); got != want {
			t.Errorf("%v: %s", v, got)
		}
	}
	if RubyClass([]any{}) != "Array" || RubyClass(NewMap()) != "Hash" {
		t.Error("Array/Hash")
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("name: d\ninstance_groups: [{name: a, jobs: [{name: j}]}]"))
	f.Add([]byte("a: &x [1, *x]"))
	// More scalars than memory: refused before any node is built.
	f.Add([]byte("[" + strings.Repeat("1,", maxNodes) + "1]"))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, parse := range []func([]byte) (any, error){Parse, ParsePsych} {
			v, err := parse(data)
			if err != nil {
				continue
			}
			// A Map's JSON (what Secrets hold) reads back as equal values
			// of the same types; NaN is equal to nothing, so it is left out.
			m, ok := v.(*Map)
			if !ok || strings.Contains(strings.ToLower(string(data)), "nan") {
				continue
			}
			js, err := json.Marshal(m)
			if err != nil {
				t.Fatalf("json: %v", err)
			}
			back, err := ParseJSON(js)
			if err != nil || !Equal(m, back) {
				t.Fatalf("%s read back as %v (%v)", js, back, err)
			}
		}
	})
}

func TestAliasLimits(t *testing.T) {
	laughs := "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
	prev := "a"
	for _, n := range []string{"b", "c", "d", "e", "f", "g", "h"} {
		laughs += n + ": &" + n + " [*" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + "]\n"
		prev = n
	}
	for _, doc := range []string{laughs, "a: &x [1, *x]", "&x {a: *x}"} {
		if _, err := Parse([]byte(doc)); err == nil {
			t.Errorf("%.40q parsed", doc)
		}
		if _, err := ParsePsych([]byte(doc)); err == nil {
			t.Errorf("%.40q parsed by ParsePsych", doc)
		}
	}
	v, err := Parse([]byte("a: &x {k: 1}\nb: *x\nc: *x"))
	if err != nil {
		t.Fatal(err)
	}
	if js, _ := json.Marshal(v); string(js) != `{"a":{"k":1},"b":{"k":1},"c":{"k":1}}` {
		t.Errorf("aliases %s", js)
	}
}

// Psych's scalar forms beyond JSON's: each value's Go type is the Ruby
// class YAML.load builds.
func TestPsychScalars(t *testing.T) {
	tests := []struct {
		in   string
		want any
	}{
		{"1.0", 1.0}, {"0.0", 0.0}, {"-0.0", math.Copysign(0, -1)}, {"1.0e+3", 1000.0}, {"1.e+3", 1000.0}, {"1,000.5", 1000.5},
		{"12345678901234567890", BigInt("12345678901234567890")}, {"-0x1_0000_0000_0000_0000", BigInt("-18446744073709551616")},
		{"0b101", int64(5)}, {"017", int64(15)}, {"1,000", int64(1000)},
		{"1:30", int64(5400)}, {"1:02:03", int64(3723)}, {"-1:30", int64(-1800)}, {"1:30.5", 5430.0},
		{":sym", Symbol("sym")}, {"::sym", Symbol(":sym")}, {`:"a b"c`, Symbol("a b")}, {":'x'", Symbol("x")},
		{".Inf", math.Inf(1)}, {"+.inf", math.Inf(1)}, {"-.INF", math.Inf(-1)},
		{"1e3", "1e3"}, {"0o17", "0o17"}, {"08", "08"}, {"-.", "-."}, {"y", "y"}, {"Off", false}, {"~", nil},
	}
	for _, tc := range tests {
		v, err := ParsePsych([]byte("- " + tc.in))
		if err != nil {
			t.Errorf("%s: %v", tc.in, err)
			continue
		}
		got := v.([]any)[0]
		if fmt.Sprintf("%T %v", got, got) != fmt.Sprintf("%T %v", tc.want, tc.want) || (tc.in == "-0.0" && !math.Signbit(got.(float64))) {
			t.Errorf("%s: got %T %v, want %T %v", tc.in, got, got, tc.want, tc.want)
		}
	}
	if v, _ := ParsePsych([]byte("- .nan")); !math.IsNaN(v.([]any)[0].(float64)) {
		t.Errorf(".nan: %v", v)
	}
	// YAML.load refuses Date and Time (Psych::DisallowedClass).
	for _, in := range []string{"2001-12-14", "2001-12-14t21:59:43.10-05:00", "2001-12-14 21:59:43.10"} {
		if _, err := ParsePsych([]byte("a: " + in)); err == nil || !strings.Contains(err.Error(), "Tried to load unspecified class") {
			t.Errorf("%s: %v", in, err)
		}
	}
	// The BOSH CLI's go-yaml v2 reads an unsigned 64-bit number in full.
	if v, _ := Parse([]byte("12345678901234567890")); v != BigInt("12345678901234567890") {
		t.Errorf("v2 uint64: %T %v", v, v)
	}
}

// What the gathering stores in Secrets reads back as the same types.
func TestJSONKeepsRubyTypes(t *testing.T) {
	m := NewMap()
	inner := NewMap()
	inner.Set("\x00", "looks like a tag")
	for _, kv := range []struct {
		k string
		v any
	}{
		{"one", 1.0}, {"int", int64(1)}, {"big", BigInt("-98765432109876543210")}, {"large", 1e21}, {"small", 1.5e-5},
		{"inf", math.Inf(1)}, {"ninf", math.Inf(-1)}, {"sym", Symbol("s")}, {"str", "1.0"}, {"tagged", inner},
		{"list", []any{1.0, int64(2), "3", 4.25, nil, true}},
	} {
		m.Set(kv.k, kv.v)
	}
	js, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"one":1.0,"int":1,"big":-98765432109876543210,"large":1e+21,"small":1.5e-05,` +
		`"inf":{"\u0000":["Float","Infinity"]},"ninf":{"\u0000":["Float","-Infinity"]},"sym":{"\u0000":["Symbol","s"]},"str":"1.0",` +
		`"tagged":{"\u0000":["Hash",{"\u0000":"looks like a tag"}]},"list":[1.0,2,"3",4.25,null,true]}`
	if string(js) != want {
		t.Fatalf("got  %s\nwant %s", js, want)
	}
	back, err := ParseJSON(js)
	if err != nil {
		t.Fatal(err)
	}
	if !Equal(m, back) {
		t.Errorf("read back differs: %v", back)
	}
	m.Set("nan", math.NaN())
	js, _ = json.Marshal(m)
	back, _ = ParseJSON(js)
	if nan, _ := back.(*Map).Get("nan"); !math.IsNaN(nan.(float64)) {
		t.Errorf("NaN read back as %v", nan)
	}
}
