package opsfile

import (
	"encoding/json"
	"strings"
	"testing"

	"gopkg.in/yaml.v2"

	"github.com/bosh-injector/bosh-injector/gather/model/yamlvalue"
)

const base = `
name: dep
instance_groups:
- name: web
  instances: 1
  jobs:
  - {name: a, release: r}
  - {name: b, release: r}
- name: db
  instances: 2
list: [1, 2, 3]
`

func TestApply(t *testing.T) {
	tests := []struct {
		name, ops, want, err string
	}{
		{"replace key", `[{type: replace, path: /name, value: other}]`, `"name":"other"`, ""},
		{"new key needs ?", `[{type: replace, path: /new, value: 1}]`, "", "operation [0] (replace /new): Expected to find a map key 'new' for path '/new' (found map keys: 'instance_groups', 'list', 'name')"},
		{"new key", `[{type: replace, path: "/new?", value: 1}]`, `"new":1`, ""},
		{"missing parent", `[{type: replace, path: /x/y, value: 1}]`, "", "operation [0] (replace /x/y): Expected to find a map key 'x' for path '/x' (found map keys: 'instance_groups', 'list', 'name')"},
		{"optional creates", `[{type: replace, path: "/x?/y/z", value: 1}]`, `"x":{"y":{"z":1}}`, ""},
		{"index", `[{type: replace, path: /list/0, value: 9}]`, `"list":[9,2,3]`, ""},
		{"negative index", `[{type: replace, path: /list/-1, value: 9}]`, `"list":[1,2,9]`, ""},
		{"append", `[{type: replace, path: /list/-, value: 4}]`, `"list":[1,2,3,4]`, ""},
		{"before", `[{type: replace, path: /list/1:before, value: 0}]`, `"list":[1,0,2,3]`, ""},
		{"after", `[{type: replace, path: /list/1:after, value: 0}]`, `"list":[1,2,0,3]`, ""},
		{"prev", `[{type: replace, path: /list/1:prev, value: 0}]`, `"list":[0,2,3]`, ""},
		{"next", `[{type: replace, path: /list/1:next, value: 0}]`, `"list":[1,2,0]`, ""},
		{"out of range", `[{type: replace, path: /list/5, value: 0}]`, "", "operation [0] (replace /list/5): Expected to find array index '5' but found array of length '3' for path '/list/5'"},
		{"matching", `[{type: replace, path: /instance_groups/name=db/instances, value: 5}]`, `{"instances":5,"name":"db"}`, ""},
		{"matching nested", `[{type: replace, path: /instance_groups/name=web/jobs/name=b/release, value: s}]`, `{"name":"b","release":"s"}`, ""},
		{"matching after", `[{type: replace, path: /instance_groups/name=web:after, value: {name: mid}}]`, `{"name":"mid"},{"instances":2,"name":"db"}`, ""},
		{"matching optional absent", `[{type: replace, path: "/instance_groups/name=new?/instances", value: 1}]`, `{"instances":1,"name":"new"}`, ""},
		{"matching none", `[{type: replace, path: /instance_groups/name=zz/instances, value: 1}]`, "", "operation [0] (replace /instance_groups/name=zz/instances): Expected to find exactly one matching array item for path '/instance_groups/name=zz' but found 0"},
		{"map mismatch", `[{type: replace, path: /name/x, value: 1}]`, "", "operation [0] (replace /name/x): Expected to find a map at path '/name/x' but found 'string'"},
		{"array mismatch", `[{type: replace, path: /name/0, value: 1}]`, "", "operation [0] (replace /name/0): Expected to find an array at path '/name/0' but found 'string'"},
		{"remove key", `[{type: remove, path: /list}]`, `"name":"db"}],"name":"dep"}`, ""},
		{"remove index", `[{type: remove, path: /list/0}]`, `"list":[2,3]`, ""},
		{"remove matching", `[{type: remove, path: /instance_groups/name=web}]`, `"instance_groups":[{"instances":2,"name":"db"}]`, ""},
		{"remove optional absent", `[{type: remove, path: "/nothing?"}]`, `"name":"dep"`, ""},
		{"remove missing", `[{type: remove, path: /nothing}]`, "", "operation [0] (remove /nothing): Expected to find a map key 'nothing' for path '/nothing' (found map keys: 'instance_groups', 'list', 'name')"},
		{"second op fails", `[{type: remove, path: /list}, {type: remove, path: /list}]`, "", "operation [1] (remove /list): Expected to find a map key 'list' for path '/list' (found map keys: 'instance_groups', 'name')"},
		{"replace root", `[{type: replace, path: "", value: {a: 1}}]`, `{"a":1}`, ""},
		{"escaped key", `[{type: replace, path: "/a~1b?", value: 1}]`, `"a/b":1`, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			doc := parse(t, base)
			ops, err := Parse([]byte(tc.ops))
			if err != nil {
				t.Fatal(err)
			}
			got, err := Apply(doc, ops)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("error = %v, want %s", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if js := show(t, got); !strings.Contains(js, tc.want) {
				t.Fatalf("got %s, want it to contain %s", js, tc.want)
			}
		})
	}
}

// Ops values are read by go-yaml v2, as the CLI reads them: 1.0 is a float
// the CLI prints as 1, y is true.
func TestValuesAreGoYAMLv2s(t *testing.T) {
	ops, err := Parse([]byte(`[{type: replace, path: "/v?", value: {f: 1.0, k: y, h: [{b: 1, a: 2}]}}]`))
	if err != nil {
		t.Fatal(err)
	}
	got, err := Apply(parse(t, base), ops)
	if err != nil {
		t.Fatal(err)
	}
	if js, want := show(t, got), `"v":{"f":1,"h":[{"a":2,"b":1}],"k":true}`; !strings.Contains(js, want) {
		t.Fatalf("got %s, want it to contain %s", js, want)
	}
}

// parse reads a document as the CLI does.
func parse(t *testing.T, s string) any {
	t.Helper()
	var doc any
	if err := yaml.Unmarshal([]byte(s), &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

// show is the JSON of what the director reads of a document the CLI
// marshals: keys sorted.
func show(t *testing.T, doc any) string {
	t.Helper()
	text, err := yaml.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	v, err := yamlvalue.ParsePsych(text)
	if err != nil {
		t.Fatal(err)
	}
	js, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(js)
}

func TestApplyLeavesInputAlone(t *testing.T) {
	doc := parse(t, base)
	ops, _ := Parse([]byte(`[{type: replace, path: /list/0, value: 9}, {type: remove, path: /name}]`))
	if _, err := Apply(doc, ops); err != nil {
		t.Fatal(err)
	}
	if js := show(t, doc); !strings.Contains(js, `"name":"dep"`) || !strings.Contains(js, `"list":[1,2,3]`) {
		t.Fatalf("input changed: %s", js)
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct{ ops, err string }{
		{`[{type: move, path: /a}]`, "Unknown operation [0] with type 'move'"},
		{`[{type: replace, value: 1}]`, "Replace operation [0]: Missing path"},
		{`[{type: replace, path: /a}]`, "Replace operation [0]: Missing value"},
		{`[{type: remove, path: /a, value: 1}]`, "Remove operation [0]: Cannot specify value"},
		{`[{type: remove, path: a}]`, "Remove operation [0]: Invalid path: Expected to start with '/'"},
		{`[{type: remove, path: /a/0:up}]`, "Remove operation [0]: Invalid path: Expected to find one of the following modifiers: 'prev', 'next', 'before', or 'after' but found 'up'"},
		{`[{type: remove, path: /a:prev}]`, "Remove operation [0]: Invalid path: Expected not to find any modifiers with key token"},
		{`[{type: replace, path: "` + strings.Repeat("/a?", 100000) + `", value: 1}]`, "Replace operation [0]: Invalid path: Expected at most 256 path segments but found 100000"},
		{`{a: 1}`, "yaml: unmarshal errors:\n  line 1: cannot unmarshal !!map into []opsfile.definition"},
	}
	for _, tc := range tests {
		_, err := Parse([]byte(tc.ops))
		if err == nil || err.Error() != tc.err {
			t.Errorf("%s: error = %v, want %s", tc.ops, err, tc.err)
		}
	}
}

func FuzzApply(f *testing.F) {
	f.Add("/instance_groups/name=web/jobs/0:after", "remove")
	f.Add("/list/-", "replace")
	f.Add("/x?/y/name=z/0", "replace")
	f.Add("/list/1:prev:next", "remove")
	f.Fuzz(func(t *testing.T, path, typ string) {
		var doc any
		_ = yaml.Unmarshal([]byte(base), &doc)
		p, err := NewPointer(path)
		if err != nil {
			return
		}
		_, _ = Apply(doc, []Op{{Type: typ, Path: p, Value: "v"}})
	})
}
