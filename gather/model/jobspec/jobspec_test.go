package jobspec

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const fixtures = "../../../test/fixtures/releases"

func TestLoadSourceTree(t *testing.T) {
	s, err := LoadSourceTree(filepath.Join(fixtures, "bus"), "bus")
	if err != nil {
		t.Fatal(err)
	}
	var srcs []string
	for _, tpl := range s.Templates {
		srcs = append(srcs, tpl.Source+">"+tpl.Destination)
		if tpl.Content == "" {
			t.Errorf("%s has no content", tpl.Source)
		}
	}
	if got := strings.Join(srcs, ","); got != "bpm.yml.erb>config/bpm.yml,bus.conf.erb>config/bus.conf,tls/ca.pem.erb>config/tls/ca.pem,tls/cert.pem.erb>config/tls/cert.pem" {
		t.Errorf("templates %s", got)
	}
	var props []string
	for _, p := range s.Properties {
		props = append(props, p.Name)
	}
	if got := strings.Join(props, ","); got != "bus.port,bus.cluster_port,bus.user,bus.password,bus.debug,bus.tls" {
		t.Errorf("properties %s", got)
	}
	if s.Property("bus.port").Default != int64(4222) || s.Property("bus.password").Default != nil || s.Property("bus.tls").Type != "certificate" {
		t.Error("defaults")
	}
	if len(s.Provides) != 1 || len(s.Provides[0].Properties) != 4 || s.Consumes[0].Type != "bus" || s.Packages[0] != "bus" {
		t.Errorf("links %+v %+v", s.Provides, s.Consumes)
	}
	if !strings.Contains(s.Monit["monit"], "check process bus") || s.IsErrand() {
		t.Error("monit / errand")
	}
	errand, err := LoadSourceTree(filepath.Join(fixtures, "shop"), "smoke-tests")
	if err != nil {
		t.Fatal(err)
	}
	if !errand.IsErrand() {
		t.Error("smoke-tests is an errand")
	}
}

// The image layout has the spec as job.MF beside monit and templates/.
func TestLoadImageLayout(t *testing.T) {
	dir := t.TempDir()
	job := filepath.Join(dir, "pgstore")
	src := filepath.Join(fixtures, "store", "jobs", "pgstore")
	copyFile(t, filepath.Join(src, "spec"), filepath.Join(job, "job.MF"))
	copyFile(t, filepath.Join(src, "monit"), filepath.Join(job, "monit"))
	for _, f := range []string{"bpm.yml.erb", "pgstore.conf.erb", "pre-start.sh.erb"} {
		copyFile(t, filepath.Join(src, "templates", f), filepath.Join(job, "templates", f))
	}
	s, err := LoadImageLayout(dir, "pgstore")
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Templates) != 3 || s.Templates[2].Destination != "bin/pre-start" || !strings.HasPrefix(s.Templates[2].Content, "#!/bin/sh") {
		t.Errorf("%+v", s.Templates)
	}
	os.Remove(filepath.Join(job, "templates", "pgstore.conf.erb"))
	if _, err := LoadImageLayout(dir, "pgstore"); err == nil || !strings.HasSuffix(err.Error(), "Missing template file 'pgstore.conf.erb' for job 'pgstore'") {
		t.Errorf("missing template: %v", err)
	}
	copyFile(t, filepath.Join(src, "templates", "pgstore.conf.erb"), filepath.Join(job, "templates", "pgstore.conf.erb"))
	os.Remove(filepath.Join(job, "monit"))
	if _, err := LoadImageLayout(dir, "pgstore"); err == nil || !strings.HasSuffix(err.Error(), "Job 'pgstore' is missing monit file") {
		t.Errorf("missing monit: %v", err)
	}
	os.WriteFile(filepath.Join(job, "pgstore.monit"), []byte("x"), 0o644)
	if s, err := LoadImageLayout(dir, "pgstore"); err != nil || s.MonitNames()[0] != "pgstore.monit" {
		t.Errorf("*.monit: %v", err)
	}
}

func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Dir(dst), 0o755)
	if err := os.WriteFile(dst, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct{ spec, err string }{
		{"name: j\nproperties: [a]", "Job 'j' has invalid properties spec format"},
		{"name: j\nprovides: [{name: l, type: t, optional: true}]", "Link 'l' of type 't' is a provides link, not allowed to have 'optional' key"},
		{"name: j\nconsumes: [{name: l, type: t}, {name: l, type: u}]", "Job 'j' specifies duplicate consumes link with name 'l'"},
		{"name: j\nprovides: [{name: l, type: t}, {name: l, type: t}]", "Job 'j' specifies duplicate provides link with name 'l'"},
		{"name: j\nconsumes: [{name: l}]", "Job 'j' has a consumes link without name or type"},
		{"name: other", "Job 'j' spec names it 'other'"},
		{"description: x", "Job 'j' spec has no name"},
		{"name: j\ntemplates: {../x: bin/x}", "Job 'j' template '../x' -> 'bin/x' escapes its directory"},
		{"name: j\ntemplates: {x: /etc/x}", "Job 'j' template 'x' -> '/etc/x' escapes its directory"},
	}
	for _, tc := range tests {
		_, err := Parse([]byte(tc.spec), "j")
		if err == nil || err.Error() != tc.err {
			t.Errorf("%q: error = %v, want %s", tc.spec, err, tc.err)
		}
	}
	// A null definition is an empty one; the spec is read as Psych reads it.
	s, err := Parse([]byte("name: j\nproperties:\n  a:\n  b: {default: {y: 1}}\nprovides: [{name: l, type: t, properties: [a]}]"), "j")
	if err != nil {
		t.Fatal(err)
	}
	if s.Properties[0].Default != nil || s.Properties[1].Default == nil || s.Provides[0].Properties[0] != "a" {
		t.Errorf("%+v", s)
	}
}

func TestPropertiesSchema(t *testing.T) {
	schema := `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "required": ["port"],
  "properties": {
    "port": {"type": "integer"},
    "name": {"type": "string"},
    "ip": {"type": "string", "format": "ipv4"},
    "mode": {"enum": ["a", "b"]},
    "tls": {"type": "object", "properties": {"certificate": {"type": "certificate"}, "ca": {"type": ["certificate", "null"]}}}
  }
}`
	s, err := CompileSchema([]byte(schema))
	if err != nil {
		t.Fatal(err)
	}
	valid := map[string]any{"port": 1, "name": "x", "ip": "10.0.0.1", "mode": "a", "tls": map[string]any{"certificate": "", "ca": nil}}
	if err := s.Validate("web", valid); err != nil {
		t.Errorf("valid properties: %v", err)
	}
	invalid := map[string]any{"name": 2, "ip": "10.0.0.900", "mode": "c", "tls": map[string]any{"certificate": "junk", "ca": "junk"}}
	err = s.Validate("web", invalid)
	want := []string{
		"Error validating properties for web",
		"object at root is missing required properties: port",
		"value at `/name` is not a string",
		"value at `/ip` does not match format: ipv4",
		`value at ` + "`/mode`" + ` is not one of: ["a","b"]`,
		"value at `/tls/certificate` is not a certificate",
		"value at `/tls/ca` is not a certificate",
	}
	if err == nil {
		t.Fatal("invalid properties accepted")
	}
	got := strings.Split(err.Error(), "\n")
	if got[0] != want[0] || len(got) != len(want) {
		t.Fatalf("got:\n%s", err)
	}
	for _, w := range want[1:] {
		found := false
		for _, g := range got[1:] {
			found = found || g == w
		}
		if !found {
			t.Errorf("missing line %q in:\n%s", w, err)
		}
	}
	for doc, msg := range map[string]string{
		`{"type": "object"}`: "You must declare your $schema draft version",
		`{"$schema": "http://json-schema.org/draft-07/schema#"}`: "Only https://json-schema.org/draft/2020-12/schema schema is currently supported",
	} {
		if _, err := CompileSchema([]byte(doc)); err == nil || err.Error() != msg {
			t.Errorf("%s: %v", doc, err)
		}
	}
}
