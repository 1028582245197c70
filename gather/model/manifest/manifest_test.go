package manifest

import (
	"strings"
	"testing"

	"github.com/bosh-injector/bosh-injector/gather/names"
)

const full = `
name: dep
releases:
- {name: nats, version: "0.1", url: docker.io/acme}
- {name: web, version: 3, url: ghcr.io/acme, stemcell: {os: ubuntu-noble, version: "1.5"}}
- {name: img, version: 1, image: registry/x/img:tag}
- {name: nourl, version: 1}
stemcells: [{alias: default, os: ubuntu-jammy, version: "1.200"}]
properties: {a: 1}
variables: [{name: pw, type: password, options: {length: 10}}]
features: {use_dns_addresses: true}
tags: {team: x}
custom_top: kept
instance_groups:
- name: web
  azs: [z1, z2]
  instances: 4
  persistent_disk: 1024
  networks: [{name: default, default: [dns, gateway]}]
  properties: {b: 2}
  env: {bosh: {}}
  update: {canaries: 1}
  jobs:
  - name: web
    release: web
    properties: {port: 1}
    consumes: {db: {from: x}}
    provides: {web: nil}
    custom_provider_definitions: [{name: extra, type: t, properties: [port]}]
  - {name: plain, release: web}
- name: smoke
  lifecycle: errand
  instances: 1
  jobs: [{name: run, release: web, properties: ~}]
addons:
- name: everywhere
  jobs: [{name: agent, release: nats}]
- name: services-only
  jobs: [{name: svc, release: nats}]
  include: {lifecycle: service}
- name: not-web
  jobs: [{name: other, release: nats}]
  exclude: {instance_groups: [web]}
- name: with-web-job
  jobs: [{name: paired, release: nats}]
  include: {jobs: [{name: web, release: web}], azs: [z2]}
`

func TestFromDocument(t *testing.T) {
	m, err := Parse([]byte(full))
	if err != nil {
		t.Fatal(err)
	}
	if m.Name != "dep" || len(m.Releases) != 4 || m.Releases[1].Version != "3" || m.Releases[1].Stemcell.OS != "ubuntu-noble" {
		t.Errorf("releases %+v", m.Releases)
	}
	if v, _ := m.Raw.Get("custom_top"); v != "kept" {
		t.Error("unknown key not kept")
	}
	if len(m.Variables) != 1 || m.Variables[0].Type != "password" || m.Features.Len() != 1 || m.Tags.Len() != 1 {
		t.Error("variables/features/tags")
	}
	web := m.InstanceGroup("web")
	if web.Instances != 4 || len(web.AZs) != 2 || web.Lifecycle != "service" || web.PersistentDisk != 1024 || web.Networks[0].Default[1] != "gateway" {
		t.Errorf("web %+v", web)
	}
	j := web.Jobs[0]
	if !j.HasProperties || j.Properties.Len() != 1 || j.Consumes.Len() != 1 || j.CustomProviderDefinitions[0].Properties[0] != "port" {
		t.Errorf("job %+v", j)
	}
	if web.Jobs[1].HasProperties {
		t.Error("absent properties reported present")
	}
	smoke := m.InstanceGroup("smoke")
	if smoke.Lifecycle != "errand" || !smoke.Jobs[0].HasProperties || smoke.Jobs[0].Properties != nil {
		t.Errorf("smoke: null properties must be present and nil: %+v", smoke.Jobs[0])
	}
	names := func(g *InstanceGroup) string {
		var n []string
		for _, j := range g.Jobs {
			n = append(n, j.Name)
		}
		return strings.Join(n, ",")
	}
	if got := names(web); got != "web,plain,agent,svc,paired" {
		t.Errorf("web jobs %s", got)
	}
	if got := names(smoke); got != "run,agent,other" {
		t.Errorf("smoke jobs %s", got)
	}
}

func TestShapeErrors(t *testing.T) {
	tests := []struct{ doc, err string }{
		{`[1]`, "manifest: expected a hash, got a list"},
		{`{name: [x]}`, "name: expected a string, got a list"},
		{`{name: d, instance_groups: [{name: a, instances: 1, jobs: [{name: j, release: r}]}, {name: b, instances: 1, jobs: [{name: j, release: [r]}]}]}`, "instance_groups[1].jobs[0].release: expected a string, got a list"},
		{`{name: d, instance_groups: [{name: a, instances: "1"}]}`, "instance_groups[0].instances: expected an integer, got a string"},
		{`{name: d, instance_groups: [{name: a}]}`, "instance_groups[0].instances: is required"},
		{`{name: d, instance_groups: {name: a}}`, "instance_groups: expected a list, got a hash"},
		{`{name: d, instance_groups: [{name: a, instances: 1, lifecycle: batch}]}`, "instance_groups[0].lifecycle: expected 'service' or 'errand', got 'batch'"},
		{`{name: d, instance_groups: [{name: a, instances: 1, azs: [1]}]}`, "instance_groups[0].azs[0]: expected a string, got an integer"},
		{`{name: d, instance_groups: [{name: a, instances: 1, jobs: [{name: j, release: r, properties: [1]}]}]}`, "instance_groups[0].jobs[0].properties: expected a hash, got a list"},
		{`{name: d, properties: yes}`, "properties: expected a hash, got a boolean"},
		{`{name: d, addons: [{jobs: [x]}]}`, "addons[0].jobs[0]: expected a hash, got a string"},
		{`{name: d, releases: [{name: r, stemcell: 1}]}`, "releases[0].stemcell: expected a hash, got an integer"},
		{`{}`, "name: is required"},
		{`{name: d, instance_groups: [{name: a, instances: 1}, {name: b, instances: 1}, {name: a, instances: 2}]}`, "Duplicate instance group name 'a'"},
		{`{name: d, instance_groups: [{name: a_b, instances: 1}, {name: A-b, instances: 1}]}`, "Invalid instance group name 'A-b', canonical name already taken: 'a_b' has the same Kubernetes name 'a-b'"},
	}
	for _, tc := range tests {
		_, err := Parse([]byte(tc.doc))
		if err == nil || err.Error() != tc.err {
			t.Errorf("%s: error = %v, want %s", tc.doc, err, tc.err)
		}
	}
}

func TestReleaseImage(t *testing.T) {
	m, err := Parse([]byte(full))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ release, want, err string }{
		{"nats", "docker.io/acme/nats:ubuntu-jammy-1.200-0.1", ""},
		{"web", "ghcr.io/acme/web:ubuntu-noble-1.5-3", ""},
		{"img", "registry/x/img:tag", ""},
		{"nourl", "", "cannot derive the image of release 'nourl': no [url]; give the release an 'image'"},
		{"none", "", "release 'none' is not in the manifest's releases"},
	}
	for _, tc := range tests {
		got, err := m.ReleaseImage(tc.release)
		if got != tc.want || (err == nil) != (tc.err == "") || (err != nil && err.Error() != tc.err) {
			t.Errorf("%s: %q, %v", tc.release, got, err)
		}
	}
	two, _ := Parse([]byte(`{name: d, releases: [{name: r, version: 1, url: u}], stemcells: [{os: a, version: 1}, {os: b, version: 2}]}`))
	if _, err := two.ReleaseImage("r"); err == nil || !strings.Contains(err.Error(), "the manifest has 2 stemcells, not exactly one") {
		t.Errorf("two stemcells: %v", err)
	}
	latest, _ := Parse([]byte(`{name: d, releases: [{name: r, version: latest, url: u}], stemcells: [{os: a, version: 1}]}`))
	if _, err := latest.ReleaseImage("r"); err == nil || !strings.Contains(err.Error(), "'latest'") {
		t.Errorf("latest: %v", err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(full))
	f.Add([]byte(`{name: d, instance_groups: [{name: a, instances: 1, jobs: [{name: j, release: r}]}]}`))
	f.Add([]byte(`{name: d, instance_groups: [{name: ../a, instances: 1000000000, azs: [], jobs: [{name: j, release: r}, {name: j, release: r}]}]}`))
	f.Add([]byte(`{name: d, instance_groups: [{name: a, instances: 10000, persistent_disk: 9223372036854775807, jobs: []}, {name: b, instances: 10000, jobs: []}, {name: c, instances: 10000, jobs: []}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Parse(data)
		if err != nil {
			return
		}
		for _, r := range m.Releases {
			_, _ = m.ReleaseImage(r.Name)
		}
		// What parses holds only names that stay in their directory,
		// bounded instances and no job twice in a group.
		total := 0
		for _, g := range m.InstanceGroups {
			total += g.Instances
			if names.PathName("instance group", g.Name) != nil || g.Instances < 0 || g.Instances > MaxInstances || g.PersistentDisk < 0 || g.PersistentDisk > MaxMiB || total > MaxDeploymentInstances {
				t.Fatalf("accepted group %q with %d instances, disk %d", g.Name, g.Instances, g.PersistentDisk)
			}
			seen := map[string]bool{}
			for _, j := range g.Jobs {
				if names.PathName("job", j.Name) != nil || seen[j.Name] {
					t.Fatalf("accepted job %q in group %q", j.Name, g.Name)
				}
				seen[j.Name] = true
			}
		}
	})
}

// TestAddonPlacement follows the director's addon filter (addon/filter.rb
// and its filter_spec): stemcell by os, and empty or criterion-only exclude
// rules.
func TestAddonPlacement(t *testing.T) {
	const groups = `
stemcells: [{alias: default, os: ubuntu-jammy, version: "1"}, {alias: win, os: windows2019, version: "1"}]
instance_groups:
- {name: linux, stemcell: default, azs: [z1], instances: 1, jobs: [{name: web, release: r}]}
- {name: windows, stemcell: win, azs: [z1], instances: 1, jobs: [{name: cell, release: r}]}
- {name: smoke, stemcell: default, lifecycle: errand, instances: 1, jobs: [{name: smoke_tests, release: s}]}
`
	for _, c := range []struct {
		rule string
		want string // the groups the addon lands on
	}{
		{`{}`, "linux,windows,smoke"},
		{`{include: {stemcell: [{os: ubuntu-jammy}, {os: ubuntu-bionic}]}}`, "linux,smoke"},
		{`{include: {stemcell: [{os: ubuntu-noble}]}}`, ""},
		{`{exclude: {stemcell: [{os: windows2019}]}}`, "linux,smoke"},
		{`{exclude: {}}`, "linux,windows,smoke"},
		{`{exclude: {teams: [a]}}`, "linux,windows,smoke"},
		{`{include: {teams: [a]}}`, "linux,windows,smoke"},
		{`{include: {stemcell: [{os: ubuntu-jammy}]}, exclude: {jobs: [{name: smoke_tests, release: s}]}}`, "linux"},
		{`{exclude: {lifecycle: errand}}`, "linux,windows"},
		{`{exclude: {azs: [z1]}}`, "smoke"},
		{`{include: {instance_groups: [linux, windows], stemcell: [{os: windows2019}]}}`, "windows"},
	} {
		doc := "name: d\n" + groups + "addons:\n- {name: a, jobs: [{name: agent, release: r}], " + strings.TrimSuffix(strings.TrimPrefix(c.rule, "{"), "}") + "}\n"
		m, err := Parse([]byte(doc))
		if err != nil {
			t.Errorf("%s: %v", c.rule, err)
			continue
		}
		var on []string
		for _, g := range m.InstanceGroups {
			if anyOf(g.Jobs, func(j Job) bool { return j.Name == "agent" }) {
				on = append(on, g.Name)
			}
		}
		if got := strings.Join(on, ","); got != c.want {
			t.Errorf("%s: on %q, want %q", c.rule, got, c.want)
		}
	}
	// A group naming no stemcell has the manifest's only one.
	m, err := Parse([]byte("name: d\nstemcells: [{alias: default, os: ubuntu-noble, version: '1'}]\ninstance_groups: [{name: g, instances: 1, jobs: []}]\n" +
		"addons: [{name: a, jobs: [{name: agent, release: r}], include: {stemcell: [{os: ubuntu-noble}]}}]\n"))
	if err != nil || len(m.InstanceGroups[0].Jobs) != 1 {
		t.Errorf("a group without a stemcell alias: %v, %+v", err, m)
	}
	for rule, want := range map[string]string{
		`{include: {stemcell: [{name: jammy}]}}`: "Stemcell addons[0].include.stemcell[0] in deployment config's include section must have an os name.",
		`{include: {deployments: [d]}}`:          "Deployment filter is not allowed for deployment level addons.",
	} {
		_, err := Parse([]byte("name: d\n" + groups + "addons:\n- {name: a, jobs: [{name: agent, release: r}], " + strings.TrimSuffix(strings.TrimPrefix(rule, "{"), "}") + "}\n"))
		if err == nil || err.Error() != want {
			t.Errorf("%s: error %v, want %q", rule, err, want)
		}
	}
}
