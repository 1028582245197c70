package boshcli

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

func show(t *testing.T, manifest string, ops ...OpsFile) string {
	t.Helper()
	doc, err := Document([]byte(manifest), ops)
	if err != nil {
		t.Fatal(err)
	}
	js, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return string(js)
}

// What the director's Psych reads of go-yaml v2's marshalling (Ruby 3.1's
// YAML.load gives the same values; gather/render/rendering's values test renders
// them through the director's template code).
func TestDocumentIsWhatTheDirectorReads(t *testing.T) {
	tests := []struct{ name, manifest, want string }{
		{"integral floats lose their fraction", "m: 3.0\nl: [1.0, 2.5]\ne: 1.0e+3\nd: 5.\nz: -0.0\n",
			`{"d":5,"e":1000,"l":[1,2.5],"m":3,"z":0}`},
		{"keys sorted inside arrays", "h: [{zeta: 1, alpha: 2}]\n", `{"h":[{"alpha":2,"zeta":1}]}`},
		{"keys sorted at every depth", "b: {w: [{z: [{d: 1, c: {f: 1, e: 2}}], a: 1}], v: 1}\na: 1\n",
			`{"a":1,"b":{"v":1,"w":[{"a":1,"z":[{"c":{"e":2,"f":1},"d":1}]}]}}`},
		{"go-yaml v2's natural key order", "h: [{b10: 1, b9: 2, B: 3, a: 4, 2x: 5}]\n",
			`{"h":[{"2x":5,"B":3,"a":4,"b9":2,"b10":1}]}`},
		// Psych alone refuses a Date; go-yaml v2 reads a string and quotes it.
		{"dates", "d: 2024-01-02\nt: 2024-01-02T10:00:00Z\n", `{"d":"2024-01-02","t":"2024-01-02T10:00:00Z"}`},
		// Psych alone reads 5400 and 5430.0.
		{"sexagesimal", "i: 1:30\nf: 1:30.5\n", `{"f":"1:30.5","i":"1:30"}`},
		// Beyond uint64 go-yaml v2 reads a float64 and prints %g: Psych
		// reads 1e+21 (no dot) as a String.
		{"huge integers", "u: 12345678901234567890\nh: 1000000000000000000000\nhh: 123456789012345678901234567890\n",
			`{"h":"1e+21","hh":1.2345678901234568e+29,"u":12345678901234567890}`},
		{"small floats", "s: 1e-7\n", `{"s":"1e-07"}`},
		{"go-yaml v2 booleans, hex and octal", "v: [y, n, 0x1F, 0777, .inf, .nan]\n",
			`{"v":[true,false,31,511,{"\u0000":["Float","Infinity"]},{"\u0000":["Float","NaN"]}]}`},
		{"a plain :name is a Symbol", "c: \":sym\"\n", `{"c":{"\u0000":["Symbol","sym"]}}`},
		{"empty", "", `null`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := show(t, tc.manifest); got != tc.want {
				t.Fatalf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

// Ops apply to go-yaml v2's values, their own values read by go-yaml v2,
// before the manifest is marshalled.
func TestOpsApplyInTheRoundTrip(t *testing.T) {
	ops := []OpsFile{
		{Name: "a.yml", Data: []byte("- {type: replace, path: /h/-, value: {zeta: 2.0, alpha: y, name: web}}\n")},
		{Name: "b.yml", Data: []byte("- {type: replace, path: /h/name=web/zeta, value: 3.0}\n")},
	}
	got := show(t, "h: [{zeta: 1, alpha: 2}]\n", ops...)
	if want := `{"h":[{"alpha":2,"zeta":1},{"alpha":true,"name":"web","zeta":3}]}`; got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

func TestErrors(t *testing.T) {
	laughs := "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n"
	prev := "a"
	for i := range 9 {
		n := string(rune('b' + i))
		laughs += fmt.Sprintf("%s: &%s [%s]\n", n, n, strings.TrimSuffix(strings.Repeat("*"+prev+", ", 9), ", "))
		prev = n
	}
	tests := []struct {
		name, manifest string
		ops            []OpsFile
		want           string
	}{
		{"malformed manifest", "name: shop\ninstance_groups: [\n", nil,
			"manifest: Evaluating manifest: yaml: line 2: did not find expected node content"},
		// go-yaml v2 refuses what Psych accepts.
		{"tab indentation", "a:\n\tb: 1\n", nil,
			"manifest: Evaluating manifest: yaml: line 2: found character that cannot start any token"},
		{"a YAML bomb", laughs, nil, "manifest: Evaluating manifest: yaml: document contains excessive aliasing"},
		{"malformed ops file", "a: 1\n", []OpsFile{{Name: "ops-01-x.yaml", Data: []byte("- {type: remove\n")}},
			"Deserializing ops file 'ops-01-x.yaml': yaml: line 1: did not find expected ',' or '}'"},
		{"ops file of the wrong shape", "a: 1\n", []OpsFile{{Name: "ops-01-x.yaml", Data: []byte("{a: 1}\n")}},
			"Deserializing ops file 'ops-01-x.yaml': yaml: unmarshal errors:\n  line 1: cannot unmarshal !!map into []opsfile.definition"},
		{"ops file read before the manifest", "a: [\n", []OpsFile{{Name: "ops-01-x.yaml", Data: []byte("- {type: move, path: /a}\n")}},
			"Deserializing ops file 'ops-01-x.yaml': Unknown operation [0] with type 'move'"},
		{"failing op", "a: 1\n", []OpsFile{{Name: "ops-01-x.yaml", Data: []byte("- {type: remove, path: /b}\n")}},
			"ops file ops-01-x.yaml: operation [0] (remove /b): Expected to find a map key 'b' for path '/b' (found map keys: 'a')"},
		// go-yaml v2 prints as plain text what Psych reads as a Time.
		{"Psych refuses what go-yaml v2 printed", "t: 2001-12-14 21:59:43.10 -5\n", nil,
			"manifest as `bosh deploy` sends it: line 1: Tried to load unspecified class: Time (\"2001-12-14 21:59:43.10 -5\")"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Document([]byte(tc.manifest), tc.ops)
			if err == nil || err.Error() != tc.want {
				t.Fatalf("error = %v\nwant %s", err, tc.want)
			}
		})
	}
}
