package rendering_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bosh-injector/bosh-injector/gather/gathering"
	"github.com/bosh-injector/bosh-injector/gather/gathering/secretdata"
	"github.com/bosh-injector/bosh-injector/gather/model/deployment"
	"github.com/bosh-injector/bosh-injector/gather/model/instance"
	"github.com/bosh-injector/bosh-injector/gather/model/variables"
	"github.com/bosh-injector/bosh-injector/gather/render/rendering"
	"github.com/bosh-injector/bosh-injector/gather/render/resolved"
	"github.com/bosh-injector/bosh-injector/gather/render/ruby"
	fixturereleases "github.com/bosh-injector/bosh-injector/test/fixtures"
)

// A release whose printer job prints, for each value, what a template sees:
// to_s, inspect, class, to_json and to_yaml. Spec defaults are read as the
// director's Psych reads job specs; the provider's link properties too.
var valuesRelease = map[string]string{
	"jobs/provider/spec": `---
name: provider
templates: {}
provides:
- name: vals
  type: vals
  properties: [l.default_float, l.big, l.inf, l.rate, l.list]
properties:
  l.default_float: {default: 2.0}
  l.big: {default: 98765432109876543210}
  l.inf: {default: -.inf}
  l.rate: {}
  l.list: {default: [1.0, 2, "3", 4.25]}
`,
	"jobs/printer/spec": `---
name: printer
templates:
  values.erb: values.txt
  bpm.yml.erb: config/bpm.yml
consumes:
- name: vals
  type: vals
properties:
  d.one: {default: 1.0}
  d.zero: {default: 0.0}
  d.big: {default: 12345678901234567890}
  d.big_hex: {default: 0xFFFFFFFFFFFFFFFFFF}
  d.inf: {default: .inf}
  d.neg_inf: {default: -.inf}
  d.nan: {default: .NaN}
  d.exp: {default: 1.0e+3}
  d.exp_no_dot: {default: 1e3}
  d.small: {default: 1.5e-05}
  d.large: {default: 1.0e+20}
  d.neg_zero: {default: -0.0}
  d.hex: {default: 0x1F}
  d.octal: {default: 017}
  d.binary: {default: 0b101}
  d.commas:
    default: 1,000
  d.sexagesimal: {default: 1:30}
  d.sexagesimal_float: {default: 1:30.5}
  d.symbol:
    default: :sym
  d.yes: {default: yes}
  d.off: {default: Off}
  d.y: {default: y}
  d.float_text: {default: "1.0"}
  m.float: {}
  m.list: {}
  m.big: {}
  m.inf: {}
  m.nan: {}
  m.exp: {}
  m.octal: {}
  m.yy: {}
  m.colon: {}
  m.dot: {}
  m.routes: {}
  m.date: {}
  m.sexagesimal: {}
  m.huge: {}
  m.huger: {}
`,
	"jobs/printer/templates/bpm.yml.erb": `processes:
- name: printer
  executable: /bin/printer
  env:
    RATE: "<%= p('d.one') %>"
    BIG: "<%= p('d.big') %>"
    LINK_INF: "<%= link('vals').p('l.inf') %>"
`,
	"jobs/provider/monit": "",
	"jobs/printer/monit":  "",
	"jobs/printer/templates/values.erb": `<%
def show(name, v)
  json = begin v.to_json; rescue => e; e.class; end
  "#{name}: #{v} | #{v.inspect} | #{v.class} | #{json} | #{v.to_yaml.inspect}\n"
end
-%>
<% %w[d.one d.zero d.big d.big_hex d.inf d.neg_inf d.nan d.exp d.exp_no_dot d.small d.large d.neg_zero d.hex d.octal d.binary d.commas
      d.sexagesimal d.sexagesimal_float d.symbol d.yes d.off d.y d.float_text
      m.float m.list m.big m.inf m.nan m.exp m.octal m.yy m.colon
      m.dot m.routes m.date m.sexagesimal m.huge m.huger].each do |n| -%>
<%= show(n, p(n)) -%>
<% end -%>
<% %w[l.default_float l.big l.inf l.rate l.list].each do |n| -%>
<%= show("link " + n, link("vals").p(n)) -%>
<% end -%>
`,
}

// Manifest values are what the director reads after the BOSH CLI's go-yaml
// v2 round trip (package boshcli): integral floats become Integers, hash
// keys come sorted at every depth, dates and 1:30 arrive as Strings, an
// integer beyond 64 bits as the Float go-yaml v2 printed.
const valuesManifest = `---
name: vals
releases: [{name: vals, version: "1"}]
stemcells: [{alias: default, os: ubuntu-noble, version: "1"}]
update: {canaries: 1, max_in_flight: 1, canary_watch_time: 1000, update_watch_time: 1000}
instance_groups:
- name: printer
  azs: [z1]
  instances: 1
  networks: [{name: default}]
  jobs:
  - name: provider
    release: vals
    properties:
      l: {rate: 0.5}
  - name: printer
    release: vals
    properties:
      m:
        float: 3.0
        list: [1.0, 2, "3", 4.25]
        big: 12345678901234567890
        inf: .inf
        nan: .nan
        exp: 1e3
        octal: 0777
        yy: y
        colon: ":sym"
        dot: 5.
        routes:
        - {zeta: 1, alpha: 2, stacks: [{z: 1, a: {x: 1, b: 2}}]}
        - {name: r, b10: ten, b9: nine, B: upper}
        date: 2024-01-02
        sexagesimal: 1:30
        huge: 1000000000000000000000
        huger: 123456789012345678901234567890
`

// What the director's templates print (Ruby's Float#to_s and inspect,
// Integer of any size, Psych's to_yaml, json's refusal of non-finite
// Floats). The rows d.one, d.zero, m.float, m.list, d.big, d.inf, d.neg_inf
// and d.nan are issue 19's table, director column; the m.* rows are Ruby
// 3.1's YAML.load of go-yaml v2's marshalling of the manifest (issue 26). Each line is "name: to_s | inspect | class | to_json | to_yaml".
const valuesWant = `d.one: 1.0 | 1.0 | Float | 1.0 | "--- 1.0\n"
d.zero: 0.0 | 0.0 | Float | 0.0 | "--- 0.0\n"
d.big: 12345678901234567890 | 12345678901234567890 | Integer | 12345678901234567890 | "--- 12345678901234567890\n"
d.big_hex: 4722366482869645213695 | 4722366482869645213695 | Integer | 4722366482869645213695 | "--- 4722366482869645213695\n"
d.inf: Infinity | Infinity | Float | JSON::GeneratorError | "--- .inf\n"
d.neg_inf: -Infinity | -Infinity | Float | JSON::GeneratorError | "--- -.inf\n"
d.nan: NaN | NaN | Float | JSON::GeneratorError | "--- .nan\n"
d.exp: 1000.0 | 1000.0 | Float | 1000.0 | "--- 1000.0\n"
d.exp_no_dot: 1e3 | "1e3" | String | "1e3" | "--- 1e3\n"
d.small: 1.5e-05 | 1.5e-05 | Float | 1.5e-05 | "--- 1.5e-05\n"
d.large: 1.0e+20 | 1.0e+20 | Float | 1.0e+20 | "--- 1.0e+20\n"
d.neg_zero: -0.0 | -0.0 | Float | -0.0 | "--- -0.0\n"
d.hex: 31 | 31 | Integer | 31 | "--- 31\n"
d.octal: 15 | 15 | Integer | 15 | "--- 15\n"
d.binary: 5 | 5 | Integer | 5 | "--- 5\n"
d.commas: 1000 | 1000 | Integer | 1000 | "--- 1000\n"
d.sexagesimal: 5400 | 5400 | Integer | 5400 | "--- 5400\n"
d.sexagesimal_float: 5430.0 | 5430.0 | Float | 5430.0 | "--- 5430.0\n"
d.symbol: sym | :sym | Symbol | "sym" | "--- :sym\n"
d.yes: true | true | TrueClass | true | "--- true\n"
d.off: false | false | FalseClass | false | "--- false\n"
d.y: y | "y" | String | "y" | "--- \"y\"\n"
d.float_text: 1.0 | "1.0" | String | "1.0" | "--- '1.0'\n"
m.float: 3 | 3 | Integer | 3 | "--- 3\n"
m.list: [1, 2, "3", 4.25] | [1, 2, "3", 4.25] | Array | [1,2,"3",4.25] | "---\n- 1\n- 2\n- '3'\n- 4.25\n"
m.big: 12345678901234567890 | 12345678901234567890 | Integer | 12345678901234567890 | "--- 12345678901234567890\n"
m.inf: Infinity | Infinity | Float | JSON::GeneratorError | "--- .inf\n"
m.nan: NaN | NaN | Float | JSON::GeneratorError | "--- .nan\n"
m.exp: 1000 | 1000 | Integer | 1000 | "--- 1000\n"
m.octal: 511 | 511 | Integer | 511 | "--- 511\n"
m.yy: true | true | TrueClass | true | "--- true\n"
m.colon: sym | :sym | Symbol | "sym" | "--- :sym\n"
m.dot: 5 | 5 | Integer | 5 | "--- 5\n"
m.routes: [{"alpha"=>2, "stacks"=>[{"a"=>{"b"=>2, "x"=>1}, "z"=>1}], "zeta"=>1}, {"B"=>"upper", "b9"=>"nine", "b10"=>"ten", "name"=>"r"}] | [{"alpha"=>2, "stacks"=>[{"a"=>{"b"=>2, "x"=>1}, "z"=>1}], "zeta"=>1}, {"B"=>"upper", "b9"=>"nine", "b10"=>"ten", "name"=>"r"}] | Array | [{"alpha":2,"stacks":[{"a":{"b":2,"x":1},"z":1}],"zeta":1},{"B":"upper","b9":"nine","b10":"ten","name":"r"}] | "---\n- alpha: 2\n  stacks:\n  - a:\n      b: 2\n      x: 1\n    z: 1\n  zeta: 1\n- B: upper\n  b9: nine\n  b10: ten\n  name: r\n"
m.date: 2024-01-02 | "2024-01-02" | String | "2024-01-02" | "--- '2024-01-02'\n"
m.sexagesimal: 1:30 | "1:30" | String | "1:30" | "--- '1:30'\n"
m.huge: 1e+21 | "1e+21" | String | "1e+21" | "--- 1e+21\n"
m.huger: 1.2345678901234568e+29 | 1.2345678901234568e+29 | Float | 1.2345678901234568e+29 | "--- 1.2345678901234568e+29\n"
link l.default_float: 2.0 | 2.0 | Float | 2.0 | "--- 2.0\n"
link l.big: 98765432109876543210 | 98765432109876543210 | Integer | 98765432109876543210 | "--- 98765432109876543210\n"
link l.inf: -Infinity | -Infinity | Float | JSON::GeneratorError | "--- -.inf\n"
link l.rate: 0.5 | 0.5 | Float | 0.5 | "--- 0.5\n"
link l.list: [1.0, 2, "3", 4.25] | [1.0, 2, "3", 4.25] | Array | [1.0,2,"3",4.25] | "---\n- 1.0\n- 2\n- '3'\n- 4.25\n"
`

// Every value reaches the template as the Ruby object the director's Psych
// builds, both through `template` (the model rendered directly) and through
// the gathering's Secret read back by the render init container.
func TestValuesReachTemplatesAsTheDirectorsRubyObjects(t *testing.T) {
	root := t.TempDir()
	if err := fixturereleases.WriteTree(filepath.Join(root, "vals"), valuesRelease); err != nil {
		t.Fatal(err)
	}
	vars := variables.NewMapSource(nil)
	m, err := deployment.Load([]byte(valuesManifest), nil, vars, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	net := instance.Network{Namespace: "ns", ClusterDomain: "cluster.local"}
	d, err := deployment.Resolve(deployment.Input{Manifest: m, Specs: deployment.SourceTreeSpecs(map[string]string{"vals": filepath.Join(root, "vals")}), Variables: vars, Network: net})
	if err != nil {
		t.Fatal(err)
	}

	t.Run("template", func(t *testing.T) {
		r, err := gathering.RenderDeployment(context.Background(), ruby.Renderer{}, d, "10.0.0.1", nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range r.Instances[0].Jobs[1].Files {
			if f.Path == "values.txt" {
				checkValues(t, string(f.Content))
				return
			}
		}
		t.Fatal("values.txt not rendered")
	})

	t.Run("BPM in the gathering", func(t *testing.T) {
		bpms, err := gathering.NewRenderBPM(context.Background(), ruby.Renderer{})(d)
		if err != nil {
			t.Fatal(err)
		}
		env := bpms[0][0].Jobs["printer"].Processes[0].Env
		if env["RATE"] != "1.0" || env["BIG"] != "12345678901234567890" || env["LINK_INF"] != "-Infinity" {
			t.Errorf("bpm env %v", env)
		}
	})

	t.Run("gather, Secret, render", func(t *testing.T) {
		enc, err := secretdata.Encode(resolved.FromDeployment(d, &d.Groups[0], net.ClusterDomain))
		if err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(t.TempDir(), resolved.Key)
		if err := os.WriteFile(file, enc, 0o644); err != nil {
			t.Fatal(err)
		}
		jobsSrc := t.TempDir()
		for _, job := range []string{"provider", "printer"} {
			dir := filepath.Join(jobsSrc, "vals", job)
			if err := os.MkdirAll(filepath.Join(dir, "templates"), 0o755); err != nil {
				t.Fatal(err)
			}
			spec := valuesRelease["jobs/"+job+"/spec"]
			if err := os.WriteFile(filepath.Join(dir, "job.MF"), []byte(spec), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "monit"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			if job == "printer" {
				for _, tpl := range []string{"values.erb", "bpm.yml.erb"} {
					if err := os.WriteFile(filepath.Join(dir, "templates", tpl), []byte(valuesRelease["jobs/printer/templates/"+tpl]), 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
		c := rendering.Config{ResolvedFile: file, JobsSrc: jobsSrc, VCAP: t.TempDir(), Namespace: net.Namespace, PodIP: "10.0.0.1"}
		if err := rendering.Run(context.Background(), c); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(c.VCAP, "jobs", "printer", "values.txt"))
		if err != nil {
			t.Fatal(err)
		}
		checkValues(t, string(got))
	})
}

func checkValues(t *testing.T, got string) {
	t.Helper()
	gotLines, wantLines := strings.SplitAfter(got, "\n"), strings.SplitAfter(valuesWant, "\n")
	for i := range max(len(gotLines), len(wantLines)) {
		var g, w string
		if i < len(gotLines) {
			g = gotLines[i]
		}
		if i < len(wantLines) {
			w = wantLines[i]
		}
		if g != w {
			t.Errorf("line %d:\n got %q\nwant %q", i+1, g, w)
		}
	}
}
