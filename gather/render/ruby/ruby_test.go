package ruby_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bosh-injector/bosh-injector/gather/model/yamlvalue"
	"github.com/bosh-injector/bosh-injector/gather/render/ruby"
)

// spec is the default template spec with the given bound properties and
// links (JSON, in Hash order).
func spec(properties, links string) *yamlvalue.Map {
	if links == "" {
		links = "{}"
	}
	v, err := yamlvalue.ParseJSON([]byte(`{"deployment":"dep","job":{"name":"ig","templates":[{"name":"myjob","version":"1"}]},` +
		`"index":0,"bootstrap":true,"name":"ig","id":"uuid-1","az":"z1",` +
		`"networks":{"default":{"type":"manual","ip":"10.0.0.5","netmask":"255.255.255.0","gateway":"10.0.0.1","default":["dns","gateway"]}},` +
		`"properties_need_filtering":true,"dns_domain_name":"bosh","persistent_disk":0,"address":"10.0.0.5","ip":"10.0.0.5",` +
		`"properties":` + properties + `,"links":` + links + `,"release":{"name":"rel","version":"1"}}`))
	if err != nil {
		panic(err)
	}
	return v.(*yamlvalue.Map)
}

// propsP binds Spec P with nothing set in the manifest; overrides
// replace top-level keys.
func propsP(overrides map[string]string) string {
	keys := []string{"port", "db", "tls", "opts", "new", "old"}
	vals := map[string]string{
		"port": `8080`, "db": `{"user":"admin","pass":null}`, "tls": `{"enabled":false}`,
		"opts": `{"alpha":{"x":1,"y":2},"zeta":1}`, "new": `{"name":null}`, "old": `{"name":null}`,
	}
	var parts []string
	for _, k := range keys {
		v := vals[k]
		if o, ok := overrides[k]; ok {
			v = o
		}
		parts = append(parts, `"`+k+`":`+v)
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// subsets is bosh-injector's link content with its subset addresses.
const subsets = `{"db":{"instances":[],"address":"g","addresses":{"all":"g","healthy":"h","azs":{"z1":{"all":"z1","healthy":"z1h"},"z2":{"all":"z2","healthy":"z2h"}}}}}`

const dbLink = `{"db":{"deployment_name":"dep","domain":"bosh","default_network":"default","instance_group":"pg",
 "az_numbers":{"z1":1,"z2":2},
 "properties":{"port":5432,"creds":{"user":"u"}},
 "instances":[{"name":"pg","id":"u1","index":0,"az":"z1","address":"10.0.1.1","bootstrap":true},
              {"name":"pg","id":"u2","index":1,"az":"z2","address":"10.0.1.2","bootstrap":false}]}}`

func render(t *testing.T, s *yamlvalue.Map, templates ...ruby.Template) []ruby.Output {
	t.Helper()
	out, err := ruby.Render(context.Background(), []ruby.Job{{Spec: s, Templates: templates}})
	if err != nil {
		t.Fatal(err)
	}
	return out[0]
}

func TestConformance(t *testing.T) {
	cases := []struct {
		name, props, links, template, want, wantErr string
	}{
		{"T05", "", "", `[<%= p("db.pass", "none") %>][<%= p("db.pass", nil) %>]`, "[none][]", ""},
		{"T08", propsP(map[string]string{"db": `{"user":"bob","pass":null}`}), "", `<%= p("db.user") %> <%= p("db").to_json %>`, `bob {"user":"bob","pass":null}`, ""},
		{"T09", "", "", `<%= p("opts").to_json %>`, `{"alpha":{"x":1,"y":2},"zeta":1}`, ""},
		{"T10c", "", "", `<%= p(["new.name","old.name"]) %>`, "", `Error filling in template 'tpl.erb' (line 1: Can't find property '["new.name", "old.name"]')`},
		{"T16a", propsP(map[string]string{"db": `{"user":"admin","pass":"s3"}`}), "", `<% if_p("db.user","db.pass") do |u,pw| %><%= u %>:<%= pw %><% end.else do %>anon<% end %>`, "admin:s3", ""},
		{"T16b", "", "", `<% if_p("db.user","db.pass") do |u,pw| %><%= u %>:<%= pw %><% end.else do %>anon<% end %>`, "anon", ""},
		{"T17", propsP(map[string]string{"old": `{"name":"o"}`}), "", `<% if_p("new.name") do |n| %>new=<%= n %><% end.else_if_p("old.name") do |o| %>old=<%= o %><% end.else do %>none<% end %>`, "old=o", ""},
		{"T18", "", "", `<% if_p("tls.enabled") do |v| %>yes=<%= v %><% end.else do %>no<% end %>`, "yes=false", ""},
		{"T19", "", "", "a:\n  <%- if p(\"tls.enabled\") -%>\n  tls: on\n  <%- else -%>\n  tls: off\n  <%- end -%>\nb: <%= p(\"port\") %>\n", "a:\n  tls: off\nb: 8080\n", ""},
		{"T20", "", "", "<%%= not evaluated %>\n<%# dropped -%>\nx\n", "<%= not evaluated %>\nx\n", ""},
		{"T21b", "", "", "x\n<% raise \"boom\" %>", "", "Error filling in template 'tpl.erb' (line 2: boom)"},
		{"T22", "", "", `<%= spec.name %> <%= spec.job.name %> <%= name %> <%= spec.index %> <%= spec.id %> <%= spec.az %> <%= spec.bootstrap %> <%= spec.deployment %> <%= spec.ip %> <%= spec.networks.default.ip %> <%= spec.release.name %>/<%= spec.release.version %> [<%= spec.nope %>]`, "ig ig ig 0 uuid-1 z1 true dep 10.0.0.5 10.0.0.5 rel/1 []", ""},
		{"T24", "", dbLink, `<%= link("db").p("port") %> <%= link("db").p("creds.user") %> <%= link("db").p("tls", "off") %>`, "5432 u off", ""},
		{"T25", "", dbLink, `<%= link("db").instances.map { |i| "#{i.name}/#{i.index}@#{i.address}:#{i.bootstrap}" }.join(",") %>`, "pg/0@10.0.1.1:true,pg/1@10.0.1.2:false", ""},
		{"T26", "", dbLink, `<% if_link("cache") do |c| %>c<% end.else_if_link("db") do |d| %>d<%= d.instances.size %><% end.else do %>none<% end %>`, "d2", ""},
		{"T27a", "", dbLink, `<%= link("cache") %>`, "", "Error filling in template 'tpl.erb' (line 1: Can't find link 'cache')"},
		{"T27b", "", dbLink, `<%= link("db").p("zz") %>`, "", `Error filling in template 'tpl.erb' (line 1: Can't find property '["zz"]')`},
		{"T27c", "", dbLink, `<%= link("db").instances[0].p("x") %>`, "", `Error filling in template 'tpl.erb' (line 1: Can't find property '["x"]')`},
		{"T28a", "", dbLink, `<%= link("db").address %>`, "q-s0.pg.default.dep.bosh", ""},
		{"T28b", "", dbLink, `<%= link("db").address(azs: ["z2","z1"], status: "healthy") %>`, "q-a1a2s3.pg.default.dep.bosh", ""},
		{"T28c", "", dbLink, `<%= link("db").address(initial_health_check: "synchronous") %>`, "q-s0y1.pg.default.dep.bosh", ""},
		{"group address", "", `{"db":{"address":"dep-pg.ns.svc.cluster.local","instances":[]}}`, `<%= link("db").address(azs: ["z1"]) %>`, "dep-pg.ns.svc.cluster.local", ""},
		{"address criteria", "", subsets, `<%= link("db").address %> <%= link("db").address(status: "healthy") %> <%= link("db").address(azs: ["z2"]) %> <%= link("db").address(azs: [:z1], status: "healthy") %> <%= link("db").address(azs: ["z2", "z1"]) %>`,
			"g h z2 z1h g", ""},
		{"address of several AZs", "", `{"db":{"instances":[],"addresses":{"all":"g","healthy":"h","azs":{"z1":{"all":"z1","healthy":"z1h"},"z2":{"all":"z2","healthy":"z2h"},"z3":{"all":"z3","healthy":"z3h"}}}}}`,
			`<%= link("db").address(azs: ["z1", "z2"]) %>`, "", `Error filling in template 'tpl.erb' (line 1: link.address: azs ["z1", "z2"] name 2 of the group's AZs ["z1", "z2", "z3"]; bosh-injector addresses one AZ or all of them)`},
		{"address of an unknown AZ", "", subsets, `<%= link("db").address(azs: ["z9"]) %>`, "", `Error filling in template 'tpl.erb' (line 1: link.address: AZs ["z9"] are not the group's AZs ["z1", "z2"])`},
		{"T36 manual link", "", `{"db":{"instances":[{"address":"db.example.com"}],"properties":{"port":3306},"address":null}}`,
			`<%= link("db").instances[0].address %> [<%= link("db").instances[0].id %>] <%= link("db").p("port") %> [<%= link("db").address %>]`, "db.example.com [] 3306 []", ""},
		{"networks idiom", "", "", `<%= spec.networks.send(spec.networks.methods(false).first).ip %>`, "10.0.0.5", ""},
		{"json pretty-print of empty collections", "", "", `<%= JSON.pretty_generate({"a" => [], "b" => {}, "c" => [1]}) %>`, "{\n  \"a\": [],\n  \"b\": {},\n  \"c\": [\n    1\n  ]\n}", ""},
		{"blank and present", "", "", `<%= "".blank? %> <%= " x".present? %> <%= nil.blank? %> <%= [].blank? %> <%= 0.blank? %>`, "true true true true false", ""},
		{"helpers and stdlib", "", "",
			"<%\ndef port_line(p)\n  \"port=#{p}\"\nend\nrequire 'json'\n-%>\n<%= port_line(p('port')) %>\n<%= {'a' => 1}.to_yaml %><%= IPAddr.new('10.0.0.0/8').include?(IPAddr.new(spec.ip)) %> <%= 'a b'.shellescape %>\n",
			"port=8080\n---\na: 1\ntrue a\\ b\n", ""},
		{"properties view", "", "", `<%= properties.db.user %> <%= raw_properties["port"] %> <%= index %>`, "admin 8080 0", ""},
		// The director evaluates ERB with a binding, not as a method body: a
		// template may define a helper class and constants, and use them
		// with links and properties; errors keep the template's line.
		{"class and constant in a template", "", dbLink,
			"<%\n  class Peer\n    def initialize(id, port)\n      @id, @port = id, port\n    end\n\n    def url\n      \"#{@id}.peers.internal:#{@port}\"\n    end\n  end\n  PORT = p(\"port\")\n%>\n<% link(\"db\").instances.each do |i| -%>\n<%= Peer.new(i.id, PORT).url %>\n<% end -%>\n",
			"\nu1.peers.internal:8080\nu2.peers.internal:8080\n", ""},
		{"class in a template, error line", "", "", "<% class Peer; end %>\nx\n<%= p(\"db.pass\") %>", "", `Error filling in template 'tpl.erb' (line 3: Can't find property '["db.pass"]')`},
		// The director's context sets @spec and @properties before the template runs.
		{"instance variables", "", "", `<%= @spec.index %> <%= @properties.db.user %>`, "0 admin", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			props := c.props
			if props == "" {
				props = propsP(nil)
			}
			got := render(t, spec(props, c.links), ruby.Template{Name: "tpl.erb", Source: c.template})[0]
			if got.Error != c.wantErr || (c.wantErr == "" && string(got.Content) != c.want) {
				t.Errorf("got %q (error %q)\nwant %q (error %q)", got.Content, got.Error, c.want, c.wantErr)
			}
		})
	}
}

// A template Ruby cannot compile as a method body is evaluated with a
// binding: a true syntax error still fails with Ruby's message and line.
func TestSyntaxErrorNamesItsLine(t *testing.T) {
	got := render(t, spec(propsP(nil), ""), ruby.Template{Name: "tpl.erb", Source: "x\n<% if %>"})[0]
	if want := "Error filling in template 'tpl.erb' (line 2: syntax error"; !strings.HasPrefix(got.Error, want) {
		t.Errorf("got %q, want it to start with %q", got.Error, want)
	}
}

func TestT21aNamesTheTemplateKeyAndLine(t *testing.T) {
	got := render(t, spec(propsP(nil), ""), ruby.Template{Name: "config.yml.erb", Source: "port: <%= p(\"port\") %>\n# c\npass: <%= p(\"db.pass\") %>\n"})[0]
	if want := `Error filling in template 'config.yml.erb' (line 3: Can't find property '["db.pass"]')`; got.Error != want {
		t.Errorf("got %q, want %q", got.Error, want)
	}
}

func TestNoMethodErrorOnLink(t *testing.T) {
	got := render(t, spec(propsP(nil), dbLink), ruby.Template{Name: "tpl.erb", Source: `<%= link("db").deployment_name %>`})[0]
	if !strings.HasPrefix(got.Error, "Error filling in template 'tpl.erb' (line 1: undefined method") || !strings.Contains(got.Error, "deployment_name") {
		t.Errorf("T27d: %q", got.Error)
	}
}

func TestIfPReturnsItsElseObject(t *testing.T) {
	got := render(t, spec(propsP(nil), ""), ruby.Template{Name: "tpl.erb", Source: `<%= if_p("port") { |v| v } %>`})[0]
	if !strings.Contains(string(got.Content), "InactiveElseBlock") {
		t.Errorf("if_p printed %q, want its else object", got.Content)
	}
}

func TestMutationDoesNotLeak(t *testing.T) {
	out := render(t, spec(propsP(nil), ""),
		ruby.Template{Name: "a.erb", Source: `<% p("opts")["zeta"] = 99; spec.index = 7 %><%= p("opts")["zeta"] %>`},
		ruby.Template{Name: "b.erb", Source: `<%= p("opts")["zeta"] %> <%= spec.index %>`})
	if string(out[0].Content) != "99" || string(out[1].Content) != "1 0" {
		t.Errorf("got %q and %q", out[0].Content, out[1].Content)
	}
}

func TestTemplateOutputIsNotMixedWithResults(t *testing.T) {
	got := render(t, spec(propsP(nil), ""), ruby.Template{Name: "tpl.erb", Source: `<% puts "noise"; $stdout.write("more") %>ok`})[0]
	if string(got.Content) != "ok" || got.Error != "" {
		t.Errorf("got %q %q", got.Content, got.Error)
	}
}

// T23: both failing templates of a job are reported, in the director's
// nested format.
func TestGroupError(t *testing.T) {
	out := render(t, spec(propsP(nil), ""),
		ruby.Template{Name: "a.erb", Source: `<%= p("x") %>`},
		ruby.Template{Name: "b.erb", Source: `<%= link("db") %>`})
	got := ruby.GroupError("ig", []ruby.JobErrors{{Job: "myjob", Templates: []string{out[0].Error, out[1].Error}}})
	want := `- Unable to render jobs for instance group 'ig'. Errors are:
  - Unable to render templates for job 'myjob'. Errors are:
    - Error filling in template 'a.erb' (line 1: Can't find property '["x"]')
    - Error filling in template 'b.erb' (line 1: Can't find link 'db')`
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if ruby.GroupError("ig", []ruby.JobErrors{{Job: "myjob"}}) != "" {
		t.Error("no errors must format as empty")
	}
}

func TestWriteJobModes(t *testing.T) {
	dir := t.TempDir()
	err := ruby.WriteJob(dir, []ruby.File{
		{Path: "monit", Content: []byte("check")},
		{Path: "bin/ctl", Content: []byte("#!/bin/sh\n")},
		{Path: "bin/config.json", Content: []byte("{}")},
		{Path: "config/app.yml", Content: []byte("a: 1")},
	})
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]os.FileMode{".": 0o750 | os.ModeDir, "monit": 0o640, "bin/ctl": 0o750, "bin/config.json": 0o750, "config/app.yml": 0o640, "config": 0o750 | os.ModeDir} {
		info, err := os.Stat(filepath.Join(dir, p))
		if err != nil {
			t.Fatal(err)
		}
		if info.Mode() != want {
			t.Errorf("%s: mode %v, want %v", p, info.Mode(), want)
		}
	}
	if err := ruby.WriteJob(dir, []ruby.File{{Path: "../escape"}}); err == nil {
		t.Error("a destination outside the job must be refused")
	}
	// A symlink inside the job (left by a previous layout) must not lead a
	// write out of it.
	outside := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := ruby.WriteJob(dir, []ruby.File{{Path: "link/escape"}}); err == nil {
		t.Error("a write through a symlink out of the job must be refused")
	}
	if _, err := os.Stat(filepath.Join(outside, "escape")); err == nil {
		t.Error("a file was written outside the job")
	}
}

func TestMissingRuby(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	if _, err := ruby.Render(context.Background(), nil); !errors.Is(err, ruby.ErrNoRuby) {
		t.Fatalf("got %v", err)
	}
}

// spec and properties are snapshots taken before the template runs, as the
// director's; links in spec are read-only.
func TestSpecIsASnapshot(t *testing.T) {
	got := render(t, spec(propsP(nil), dbLink), ruby.Template{Name: "tpl.erb", Source: `<% p("opts")["extra"] = 1; raw_properties["port"] = 1 -%>
<%= spec.properties.opts.respond_to?(:extra) %> <%= properties.port %> <%= spec.properties.port %> <%= p("port") %> <%= spec.links.db.instances.size %>
<% begin; spec.links.db.properties.port = 1; rescue FrozenError; %>frozen<% end %>`})[0]
	if want := "false 8080 8080 1 2\nfrozen"; string(got.Content) != want || got.Error != "" {
		t.Errorf("got %q (%s), want %q", got.Content, got.Error, want)
	}
}
