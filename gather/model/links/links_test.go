package links_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/bosh-injector/bosh-injector/gather/model/deployment"
	"github.com/bosh-injector/bosh-injector/gather/model/instance"
	"github.com/bosh-injector/bosh-injector/gather/model/jobspec"
	"github.com/bosh-injector/bosh-injector/gather/model/links"
	"github.com/bosh-injector/bosh-injector/gather/model/variables"
)

// The link conformance specs.
var specs = map[string]string{
	"web": `
name: web
consumes:
- {name: primary_db, type: db}
- {name: backup_db, type: db, optional: true}
`,
	"postgres": `
name: postgres
provides:
- {name: conn, type: db, properties: [port, password]}
properties:
  port: {default: 5432}
  password: {}
`,
	"postgres-missing": `
name: postgres-missing
provides:
- {name: conn, type: db, properties: [port, missing]}
properties:
  port: {default: 5432}
`,
	// The director's multidisk test job (disk_using_job).
	"disk-user": `
name: disk-user
consumes:
- {name: slow, type: disk}
- {name: fast, type: disk, optional: true}
`,
	"nats": `
name: nats
provides:
- {name: nats, type: nats, properties: [nats.port]}
consumes:
- {name: nats, type: nats}
properties:
  nats.port: {default: 4222}
`,
}

func specSource(release, job string) (*jobspec.Spec, error) {
	s, ok := specs[job]
	if !ok {
		return nil, fmt.Errorf("no job %s", job)
	}
	return jobspec.Parse([]byte(s), job)
}

// resolve runs the manifest (instance groups only) through the deployment
// model and returns every job's links as JSON by "group/job".
func resolve(t *testing.T, groups string) (map[string]string, error) {
	t.Helper()
	d, err := resolveIn(t, "dep", groups, nil)
	if err != nil {
		return nil, err
	}
	return linksOf(t, d), nil
}

func resolveIn(t *testing.T, name, groups string, shared func(string) ([]links.SharedLink, bool)) (*deployment.Deployment, error) {
	t.Helper()
	src := variables.NewMapSource(nil)
	src.Put("pw", "secret")
	m, err := deployment.Load([]byte("name: "+name+"\nreleases: [{name: pg, version: 1}, {name: app, version: 2}]\ninstance_groups:\n"+groups), nil, src, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return deployment.Resolve(deployment.Input{Manifest: m, Specs: specSource, Variables: src,
		Network: instance.Network{Namespace: "ns", ClusterDomain: "cluster.local"}, Shared: shared})
}

func linksOf(t *testing.T, d *deployment.Deployment) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, g := range d.Groups {
		for _, j := range g.Jobs {
			js, err := json.Marshal(j.Links)
			if err != nil {
				t.Fatal(err)
			}
			out[g.Manifest.Name+"/"+j.Name] = string(js)
		}
	}
	return out
}

// A consumer naming another deployment of the namespace resolves against
// the links that deployment shares, with the director's errors otherwise.
func TestCrossDeployment(t *testing.T) {
	data, err := resolveIn(t, "data", pg("pg", ", properties: {password: ((pw))}, provides: {conn: {as: db, shared: true}}")+pg("unshared", ""), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(data.Shared) != 1 || data.Shared[0].Name != "db" || data.Shared[0].Group != "pg" {
		t.Fatalf("shared %+v", data.Shared)
	}
	shared := func(dep string) ([]links.SharedLink, bool) {
		if dep == "data" {
			return data.Shared, true
		}
		return nil, false
	}
	d, err := resolveIn(t, "dep", app(", consumes: {primary_db: {from: db, deployment: data}, backup_db: nil}"), shared)
	if err != nil {
		t.Fatal(err)
	}
	got := linksOf(t, d)["app/web"]
	for _, want := range []string{`"deployment_name":"data"`, `"properties":{"port":5432,"password":"secret"}`,
		`"address":"data-pg.ns.svc.cluster.local"`, `"address":"data-pg-1.ns.svc.cluster.local"`} {
		if !strings.Contains(got, want) {
			t.Errorf("consumed link lacks %s:\n%s", want, got)
		}
	}
	for name, tc := range map[string]struct{ consumes, err string }{
		"unshared": {"{primary_db: {from: conn, deployment: data}, backup_db: nil}", wrapper +
			"  - Failed to resolve link 'primary_db' with alias 'conn' and type 'db' from job 'web' in instance group 'app'. Details below:\n    - No link providers found"},
		"missing deployment": {"{primary_db: {from: db, deployment: nothing}, backup_db: nil}",
			"Link 'db' in job 'web' from instance group 'app' consumes from deployment 'nothing', but the deployment does not exist."},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := resolveIn(t, "dep", app(", consumes: "+tc.consumes), shared)
			if err == nil || err.Error() != tc.err {
				t.Errorf("error:\n%v\nwant:\n%s", err, tc.err)
			}
		})
	}
}

func pg(name, extra string) string {
	return fmt.Sprintf("- {name: %s, instances: 2, azs: [z1, z2], jobs: [{name: postgres, release: pg%s}]}\n", name, extra)
}

func app(extra string) string {
	return fmt.Sprintf("- {name: app, instances: 1, jobs: [{name: web, release: app%s}]}\n", extra)
}

const wrapper = "Failed to resolve links from deployment 'dep'. See errors below:\n"

func TestLinks(t *testing.T) {
	conn := func(group string) string {
		return `{"deployment_name":"dep","domain":"bosh","default_network":"default","networks":["default"],"instance_group":"` + group + `",` +
			`"properties":{"port":5432,"password":"pw"},"use_short_dns_addresses":false,"use_dns_addresses":true,"use_link_dns_names":false,"group_name":"conn-db",` +
			`"instances":[{"name":"` + group + `","id":"` + instance.ID("dep", group, 0) + `","index":0,"bootstrap":true,"az":"z1","address":"dep-` + group + `-0.ns.svc.cluster.local"},` +
			`{"name":"` + group + `","id":"` + instance.ID("dep", group, 1) + `","index":1,"bootstrap":false,"az":"z2","address":"dep-` + group + `-1.ns.svc.cluster.local"}],` +
			`"address":"dep-` + group + `.ns.svc.cluster.local",` +
			`"addresses":{"all":"dep-` + group + `.ns.svc.cluster.local","healthy":"dep-` + group + `-healthy.ns.svc.cluster.local",` +
			`"azs":{"z1":{"all":"dep-` + group + `-az-z1.ns.svc.cluster.local","healthy":"dep-` + group + `-az-z1-healthy.ns.svc.cluster.local"},` +
			`"z2":{"all":"dep-` + group + `-az-z2.ns.svc.cluster.local","healthy":"dep-` + group + `-az-z2-healthy.ns.svc.cluster.local"}}}}`
	}
	disks := func(disks, consumes string) string {
		return "- {name: db, instances: 1, persistent_disks: [" + disks + "], jobs: [{name: disk-user, release: pg" + consumes + "}]}\n"
	}
	disk := func(name string) string {
		return `{"deployment_name":"dep","properties":{"name":"` + name + `"},"networks":[],"instances":[]}`
	}
	noProvider := "  - Failed to resolve link 'primary_db' with type 'db' from job 'web' in instance group 'app'. Details below:\n    - No link providers found"
	tests := []struct {
		name, groups string
		want         map[string]string
		err          string
	}{
		{"T29 implicit by type", pg("pg", ", properties: {password: pw}") + app(""),
			map[string]string{"app/web": `{"primary_db":` + conn("pg") + `,"backup_db":` + conn("pg") + `}`, "pg/postgres": `{}`}, ""},
		{"T30 multiple providers", pg("pg1", "") + pg("pg2", "") + app(""), nil, wrapper +
			"  - Failed to resolve link 'primary_db' with type 'db' from job 'web' in instance group 'app'. Multiple link providers found:\n" +
			"    - Link provider 'conn' from job 'postgres' in instance group 'pg1' in deployment 'dep'\n" +
			"    - Link provider 'conn' from job 'postgres' in instance group 'pg2' in deployment 'dep'\n" +
			"  - Failed to resolve link 'backup_db' with type 'db' from job 'web' in instance group 'app'. Multiple link providers found:\n" +
			"    - Link provider 'conn' from job 'postgres' in instance group 'pg1' in deployment 'dep'\n" +
			"    - Link provider 'conn' from job 'postgres' in instance group 'pg2' in deployment 'dep'"},
		{"T31 from/as", pg("pg1", ", properties: {password: pw}, provides: {conn: {as: db1}}") + pg("pg2", ", properties: {password: pw}, provides: {conn: {as: db2}}") +
			app(", consumes: {primary_db: {from: db1}, backup_db: {from: db2}}"),
			map[string]string{"app/web": `{"primary_db":` + strings.Replace(conn("pg1"), "conn-db", "db1-db", 1) + `,"backup_db":` + strings.Replace(conn("pg2"), "conn-db", "db2-db", 1) + `}`}, ""},
		{"T32 no provider", app(""), nil, wrapper + noProvider},
		{"explicit {} matches by name", pg("pg", "") + app(", consumes: {primary_db: {}}"), nil, wrapper + noProvider},
		{"T33 explicit optional must resolve", app(", consumes: {primary_db: nil, backup_db: {from: nothing}}"), nil, wrapper + noProvider + "\n" +
			"  - Failed to resolve link 'backup_db' with alias 'nothing' and type 'db' from job 'web' in instance group 'app'. Details below:\n    - No link providers found"},
		{"T34a blocked optional", pg("pg", ", properties: {password: pw}") + app(", consumes: {backup_db: nil}"),
			map[string]string{"app/web": `{"primary_db":` + conn("pg") + `}`}, ""},
		{"T34b blocked required", pg("pg", "") + app(", consumes: {primary_db: nil}"), nil, wrapper + noProvider},
		{"T34c YAML null", pg("pg", "") + app(", consumes: {primary_db: ~}"), nil,
			"Consumer 'primary_db' in job 'web' in instance group 'app' specified in the manifest should only be a hash or string 'nil'"},
		{"T34d provider blocked", pg("pg", ", provides: {conn: nil}") + app(""), nil, wrapper + noProvider},
		{"provider null", pg("pg", ", provides: {conn: ~}") + app(""), nil,
			"Provider 'conn' in job 'postgres' in instance group 'pg' specified in the manifest should only be a hash or string 'nil'"},
		{"provider name key", pg("pg", ", provides: {conn: {name: x}}") + app(""), nil,
			"Cannot specify 'name' or 'type' properties in the manifest for link 'conn' in job 'postgres' in instance group 'pg'. Please provide these keys in the release only."},
		{"T35 cross-deployment", app(", consumes: {primary_db: {from: db, deployment: data}}"), nil,
			"Link 'db' in job 'web' from instance group 'app' consumes from deployment 'data', but the deployment does not exist."},
		{"T36 manual link", app(", consumes: {primary_db: {instances: [{address: db.example.com}], properties: {port: 3306}}}"),
			map[string]string{"app/web": `{"primary_db":{"instances":[{"address":"db.example.com"}],"properties":{"port":3306},"address":null,"deployment_name":"dep"}}`}, ""},
		{"T36 manual with from", app(", consumes: {primary_db: {from: x, instances: [{address: db.example.com}], properties: {port: 3306}}}"), nil,
			"Cannot specify both 'instances' and 'from' keys for link 'primary_db' in job 'web' in instance group 'app'.\n" +
				"Cannot specify both 'properties' and 'from' keys for link 'primary_db' in job 'web' in instance group 'app'."},
		{"manual properties without instances", app(", consumes: {primary_db: {properties: {port: 1}}}"), nil,
			"Cannot specify 'properties' without 'instances' for link 'primary_db' in job 'web' in instance group 'app'."},
		{"manual address only", app(", consumes: {primary_db: {address: db.example.com}}"),
			map[string]string{"app/web": `{"primary_db":{"instances":[],"properties":null,"address":"db.example.com","deployment_name":"dep"}}`}, ""},
		{"ip_addresses not boolean", pg("pg", "") + app(", consumes: {primary_db: {ip_addresses: 1}}"), nil,
			"Cannot specify non boolean values for 'ip_addresses' field for link 'primary_db' in job 'web' in instance group 'app'."},
		{"network not on provider", pg("pg", ", properties: {password: pw}") + app(", consumes: {primary_db: {from: conn, network: other}}"), nil, wrapper +
			"  - Failed to resolve link 'primary_db' with alias 'conn' and type 'db' from job 'web' in instance group 'app'. Details below:\n" +
			"    - Link provider 'conn' from job 'postgres' in instance group 'pg' in deployment 'dep' does not belong to network 'other'"},
		{"T37a undeclared link property", "- {name: pg, instances: 1, jobs: [{name: postgres-missing, release: pg}]}\n" + app(""), nil,
			"Link property missing in template postgres-missing is not defined in release spec"},
		{"T37b explicit null kept in link", pg("pg", ", properties: {port: null, password: pw}") + app(", consumes: {backup_db: nil}"),
			map[string]string{"app/web": `"properties":{"port":null,"password":"pw"}`}, ""},
		{"link properties interpolated", pg("pg", ", properties: {password: ((pw))}") + app(", consumes: {backup_db: nil}"),
			map[string]string{"app/web": `"properties":{"port":5432,"password":"secret"}`}, ""},
		{"self link", "- {name: nats, instances: 3, jobs: [{name: nats, release: pg}]}\n",
			map[string]string{"nats/nats": `"instance_group":"nats","properties":{"nats":{"port":4222}}`}, ""},
		{"custom provider", "- {name: nats, instances: 1, jobs: [{name: nats, release: pg, properties: {nats: {port: 1}}, custom_provider_definitions: [{name: extra, type: db, properties: [nats.port]}]}]}\n" + app(", consumes: {backup_db: nil}"),
			map[string]string{"app/web": `"properties":{"nats":{"port":1}},"use_short_dns_addresses":false,"use_dns_addresses":true,"use_link_dns_names":false,"group_name":"extra-db"`}, ""},
		// Disk links: each of a group's persistent_disks provides a link of
		// type disk named like the disk, whose content is the director's
		// DiskLink spec, resolved by `from` or implicitly by type.
		{"disk links from", disks("{name: low-iops, type: gp2}, {name: high_iops, type: io1}", ", consumes: {slow: {from: low-iops}, fast: {from: high_iops}}"),
			map[string]string{"db/disk-user": `{"slow":` + disk("low-iops") + `,"fast":` + disk("high_iops") + `}`}, ""},
		{"disk link by type", disks("{name: data, type: gp2}", ""),
			map[string]string{"db/disk-user": `{"slow":` + disk("data") + `,"fast":` + disk("data") + `}`}, ""},
		{"disk links, two disks", disks("{name: a, type: gp2}, {name: b, type: gp2}", ", consumes: {fast: nil}"), nil, wrapper +
			"  - Failed to resolve link 'slow' with type 'disk' from job 'disk-user' in instance group 'db'. Multiple link providers found:\n" +
			"    - Disk link provider 'a' from instance group 'db'\n" +
			"    - Disk link provider 'b' from instance group 'db'"},
		{"disk link network", disks("{name: a, type: gp2}", ", consumes: {slow: {from: a, network: default}, fast: nil}"), nil, wrapper +
			"  - Failed to resolve link 'slow' with alias 'a' and type 'disk' from job 'disk-user' in instance group 'db'. Details below:\n" +
			"    - Disk link provider 'a' from instance group 'db' does not contain any networks"},
		{"custom provider clash", "- {name: nats, instances: 1, jobs: [{name: nats, release: pg, custom_provider_definitions: [{name: nats, type: db}]}]}\n", nil,
			"Custom provider 'nats' in job 'nats' in instance group 'nats' is already defined in release 'pg'"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := resolve(t, tc.groups)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("error:\n%v\nwant:\n%s", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for k, want := range tc.want {
				if !strings.Contains(got[k], want) {
					t.Errorf("%s:\n got %s\nwant %s", k, got[k], want)
				}
			}
		})
	}
}

// An optional implicit link without a provider is simply absent (T32).
func TestOptionalImplicitWithoutProvider(t *testing.T) {
	specs["web-opt"] = "name: web-opt\nconsumes: [{name: backup_db, type: db, optional: true}]"
	defer delete(specs, "web-opt")
	got, err := resolve(t, "- {name: app, instances: 1, jobs: [{name: web-opt, release: app}]}\n")
	if err != nil {
		t.Fatal(err)
	}
	if got["app/web-opt"] != "{}" {
		t.Fatalf("got %s", got["app/web-opt"])
	}
}
