package deployment

import (
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bosh-injector/bosh-injector/gather/model/instance"
	"github.com/bosh-injector/bosh-injector/gather/model/jobspec"
	"github.com/bosh-injector/bosh-injector/gather/model/variables"
	"github.com/bosh-injector/bosh-injector/gather/model/yamlvalue"
)

const fixtures = "../../../test/fixtures"

var network = instance.Network{Namespace: "shop-ns", ClusterDomain: "cluster.local"}

func fixtureSpecs() SpecSource {
	return SourceTreeSpecs(map[string]string{
		"bus":   filepath.Join(fixtures, "releases", "bus"),
		"store": filepath.Join(fixtures, "releases", "store"),
		"shop":  filepath.Join(fixtures, "releases", "shop"),
	})
}

func loadShop(t *testing.T, withOps bool) (*Deployment, *variables.MapSource) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(fixtures, "deployments", "shop.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var ops []OpsFile
	if withOps {
		o, err := os.ReadFile(filepath.Join(fixtures, "deployments", "ops", "scale-web.yml"))
		if err != nil {
			t.Fatal(err)
		}
		ops = append(ops, OpsFile{Name: "scale-web.yml", Data: o})
	}
	vars := variables.NewMapSource(nil)
	m, err := Load(data, ops, vars, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	d, err := Resolve(Input{Manifest: m, Specs: fixtureSpecs(), Variables: vars, Network: network})
	if err != nil {
		t.Fatal(err)
	}
	return d, vars
}

func js(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestShopFixture(t *testing.T) {
	d, vars := loadShop(t, true)
	if d.Name != "shop" || len(d.Groups) != 4 {
		t.Fatalf("%s %d", d.Name, len(d.Groups))
	}
	bus, db, web, smoke := d.Groups[0], d.Groups[1], d.Groups[2], d.Groups[3]

	// Ops file applied: four web instances, workers and debug set.
	if web.Manifest.Instances != 4 || len(web.Instances) != 4 {
		t.Errorf("web instances %d", len(web.Instances))
	}
	if w, _ := web.Jobs[0].Properties.Get("storefront"); !strings.Contains(js(t, w), `"workers":4`) {
		t.Errorf("workers: %s", js(t, w))
	}

	// Variables generated and interpolated after binding.
	pw, _, _ := vars.Get("bus_password")
	busProps := js(t, bus.Jobs[0].Properties)
	if !strings.HasPrefix(busProps, `{"bus":{"port":4222,"cluster_port":4223,"user":"bus","password":"`+pw.(string)+`","debug":true,"tls":{"ca":"-----BEGIN CERTIFICATE-----`) {
		t.Errorf("bus properties %s", busProps)
	}
	if !regexp.MustCompile(`^[a-z0-9]{20}$`).MatchString(pw.(string)) {
		t.Errorf("password %q", pw)
	}

	// The bus links to itself: every member sees all three.
	self, _ := bus.Jobs[0].Links.Get("bus")
	selfJS := js(t, self)
	for i := 0; i < 3; i++ {
		if !strings.Contains(selfJS, fmt.Sprintf(`"address":"shop-bus-%d.shop-ns.svc.cluster.local"`, i)) {
			t.Errorf("self link lacks member %d: %s", i, selfJS)
		}
	}
	if !strings.Contains(selfJS, `"properties":{"bus":{"port":4222,"cluster_port":4223,"user":"bus","password":"`+pw.(string)+`"}}`) {
		t.Errorf("self link properties: %s", selfJS)
	}

	// The web tier: database and bus resolved, the optional cache absent.
	if got := strings.Join(web.Jobs[0].Links.Keys(), ","); got != "database,bus" {
		t.Errorf("web links %s", got)
	}
	dbLink, _ := web.Jobs[0].Links.Get("database")
	dbPW, _, _ := vars.Get("db_password")
	if !strings.Contains(js(t, dbLink), `"properties":{"pgstore":{"port":5432,"admin":{"username":"admin","password":"`+dbPW.(string)+`"},"databases":[{"name":"shop","owner":"storefront"}]}}`) {
		t.Errorf("database link %s", js(t, dbLink))
	}
	if !strings.Contains(js(t, dbLink), `"address":"shop-db.shop-ns.svc.cluster.local",`) {
		t.Errorf("group address missing: %s", js(t, dbLink))
	}

	// Instances over two AZs and their spec documents.
	if web.Instances[1].AZ != "z2" || web.Instances[2].AZ != "z1" || web.Instances[3].Ordinal != 1 {
		t.Errorf("AZs %+v", web.Instances)
	}
	spec := web.Instances[1].Specs[0]
	for key, want := range map[string]any{"deployment": "shop", "name": "web", "index": int64(1), "bootstrap": false, "az": "z2",
		"address": "shop-web-1.shop-ns.svc.cluster.local", "persistent_disk": int64(0), "id": instance.ID("shop", "web", 1)} {
		if got, _ := spec.Get(key); got != want {
			t.Errorf("spec.%s = %v, want %v", key, got, want)
		}
	}
	if rel, _ := spec.Get("release"); js(t, rel) != `{"name":"shop","version":"1.0.0"}` {
		t.Errorf("release %s", js(t, rel))
	}
	if l, _ := spec.Get("links"); l != web.Jobs[0].Links {
		t.Error("spec.links is not the job's links")
	}
	if pd, _ := db.Instances[0].Specs[0].Get("persistent_disk"); pd != int64(1024) {
		t.Errorf("persistent disk %v", pd)
	}

	// The errand consumes the web link.
	if smoke.Manifest.Lifecycle != "errand" || !smoke.Jobs[0].Spec.IsErrand() {
		t.Error("errand")
	}
	if l, _ := smoke.Jobs[0].Links.Get("web"); !strings.Contains(js(t, l), `"properties":{"storefront":{"port":8080}}`) {
		t.Errorf("web link %s", js(t, l))
	}

	// Release images derive from url, stemcell and version.
	m := d.Manifest
	for _, r := range []string{"bus", "store", "shop"} {
		img, err := m.ReleaseImage(r)
		if err != nil || img != "localhost/bosh-injector-fixtures/"+r+":ubuntu-noble-1.0-1.0.0" {
			t.Errorf("%s image %s %v", r, img, err)
		}
	}
}

// Loading twice with the same store changes no variable (never regenerated).
func TestVariablesStable(t *testing.T) {
	data, _ := os.ReadFile(filepath.Join(fixtures, "deployments", "shop.yml"))
	vars := variables.NewMapSource(nil)
	if _, err := Load(data, nil, vars, time.Now()); err != nil {
		t.Fatal(err)
	}
	before := js(t, vars.Values())
	if _, err := Load(data, nil, vars, time.Now()); err != nil {
		t.Fatal(err)
	}
	if js(t, vars.Values()) != before {
		t.Error("variables regenerated")
	}
}

func specsFrom(texts map[string]string) SpecSource {
	return func(release, job string) (*jobspec.Spec, error) {
		s, ok := texts[job]
		if !ok {
			return nil, fmt.Errorf("no job %s", job)
		}
		return jobspec.Parse([]byte(s), job)
	}
}

func resolveText(t *testing.T, man string, specs map[string]string, vals string) (*Deployment, error) {
	t.Helper()
	v, _ := yamlvalue.Parse([]byte(vals))
	m, _ := v.(*yamlvalue.Map)
	vars := variables.NewMapSource(m)
	mf, err := Load([]byte(man), nil, vars, time.Now())
	if err != nil {
		return nil, err
	}
	return Resolve(Input{Manifest: mf, Specs: specsFrom(specs), Variables: vars, Network: network})
}

func TestT39Binding(t *testing.T) {
	specs := map[string]string{
		"a": "name: a\nproperties: {tls.certificate: {}}",
		"b": "name: b\nproperties: {tls.cert: {type: certificate}, port: {}, url: {}, dflt: {default: ((port))}}",
	}
	vals := `{port: 8443, tls: {ca: A, certificate: C, private_key: K}}`
	man := func(job, props string) string {
		return "name: dep\nreleases: [{name: r, version: 1}]\ninstance_groups:\n- {name: ig, instances: 1, jobs: [{name: " + job + ", release: r, properties: " + props + "}]}\n"
	}
	// (f) binding precedes interpolation.
	_, err := resolveText(t, man("a", "{tls: ((tls))}"), specs, vals)
	want := "- Unable to process instance group 'ig'. Errors are:\n  - Job 'a': Property 'tls.certificate' expects a hash, but received 'String'"
	if err == nil || err.Error() != want {
		t.Errorf("T39f error:\n%v\nwant\n%s", err, want)
	}
	// (a)-(d), defaults interpolated too.
	d, err := resolveText(t, man("b", `{tls: {cert: ((tls))}, port: ((port)), url: "https://h:((port))/"}`), specs, vals)
	if err != nil {
		t.Fatal(err)
	}
	if got := js(t, d.Groups[0].Jobs[0].Properties); got != `{"tls":{"cert":{"ca":"A","certificate":"C","private_key":"K"}},"port":8443,"url":"https://h:8443/","dflt":8443}` {
		t.Errorf("T39 a-d: %s", got)
	}
	// (e) an embedded Hash.
	_, err = resolveText(t, man("b", `{url: "x-((tls))"}`), specs, vals)
	want = "- Unable to process instance group 'ig'. Errors are:\n  - Job 'b': - Failed to substitute variable: Can not replace '((tls))' in 'x-((tls))'. The value should be a String or an Integer."
	if err == nil || err.Error() != want {
		t.Errorf("T39e error:\n%v\nwant\n%s", err, want)
	}
}

func TestAggregatedErrors(t *testing.T) {
	specs := map[string]string{"p": "name: p\nproperties: {db.user: {}}"}
	man := `name: dep
releases: [{name: r, version: 1}]
instance_groups:
- {name: g1, instances: 1, jobs: [{name: p, release: r, properties: {db: 1}}, {name: missing, release: r}]}
- {name: g2, instances: 1, jobs: [{name: p, release: nope}]}
- {name: g3, instances: 1, jobs: [{name: p, release: r}]}
`
	_, err := resolveText(t, man, specs, "{}")
	want := `- Unable to process instance group 'g1'. Errors are:
  - Job 'missing': no job missing
  - Job 'p': Property 'db.user' expects a hash, but received 'Integer'
- Unable to process instance group 'g2'. Errors are:
  - Job 'p': release 'nope' is not in the manifest's releases`
	if err == nil || err.Error() != want {
		t.Errorf("error:\n%v\nwant\n%s", err, want)
	}
}

// Properties are not interpolated at load; the rest of the manifest is.
func TestLoadInterpolatesAllButProperties(t *testing.T) {
	vars := variables.NewMapSource(nil)
	vars.Put("n", int64(3))
	vars.Put("az", "z9")
	m, err := Load([]byte(`name: dep
properties: {a: ((missing))}
instance_groups:
- name: g
  instances: ((n))
  azs: [((az))]
  properties: {b: ((missing))}
  jobs: [{name: j, release: r, properties: {c: ((missing))}, consumes: {l: {instances: [{address: ((az))}]}}}]
`), nil, vars, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	g := m.InstanceGroups[0]
	if g.Instances != 3 || g.AZs[0] != "z9" {
		t.Errorf("%+v", g)
	}
	if js(t, m.Properties) != `{"a":"((missing))"}` || js(t, g.Properties) != `{"b":"((missing))"}` || js(t, g.Jobs[0].Properties) != `{"c":"((missing))"}` {
		t.Error("property subtrees interpolated at load")
	}
	if js(t, g.Jobs[0].Consumes) != `{"l":{"instances":[{"address":"z9"}]}}` {
		t.Errorf("consumes %s", js(t, g.Jobs[0].Consumes))
	}
	_, err = Load([]byte("name: dep\ninstance_groups: [{name: g, instances: ((nope))}]"), nil, vars, time.Now())
	if err == nil || err.Error() != "- Failed to find variable 'nope' from config server" {
		t.Errorf("error %v", err)
	}
	_, err = Load([]byte("name: dep\n"), []OpsFile{{Name: "bad.yml", Data: []byte("- {type: remove, path: /x}")}}, vars, time.Now())
	if err == nil || err.Error() != "ops file bad.yml: operation [0] (remove /x): Expected to find a map key 'x' for path '/x' (found map keys: 'name')" {
		t.Errorf("ops error %v", err)
	}
}

// TestVariableOptionsInterpolated: a variable's options name given
// variables (cf-deployment's `common_name: api.((system_domain))`), which
// the director interpolates before it generates.
func TestVariableOptionsInterpolated(t *testing.T) {
	vars := variables.NewMapSource(nil)
	vars.Put("system_domain", "sys.example.com")
	m, err := Load([]byte(`name: dep
variables:
- {name: ca, type: certificate, options: {is_ca: true, common_name: ca}}
- {name: api_tls, type: certificate, options: {ca: ca, common_name: "api.((system_domain))", alternative_names: ["api.((system_domain))"]}}
`), nil, vars, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if got := js(t, m.Variables[1].Options); got != `{"alternative_names":["api.sys.example.com"],"ca":"ca","common_name":"api.sys.example.com"}` {
		t.Errorf("options %s", got)
	}
	v, _, _ := vars.Get("api_tls")
	certPEM, _ := v.(*yamlvalue.Map).Get("certificate")
	block, _ := pem.Decode([]byte(certPEM.(string)))
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if cert.Subject.CommonName != "api.sys.example.com" || !slices.Contains(cert.DNSNames, "api.sys.example.com") {
		t.Errorf("certificate for %q %v", cert.Subject.CommonName, cert.DNSNames)
	}
	_, err = Load([]byte(`name: dep
variables: [{name: x, type: certificate, options: {is_ca: true, common_name: "((nope))"}}]
`), nil, vars, time.Now())
	if err == nil || err.Error() != "- Failed to find variable 'nope' from config server" {
		t.Errorf("error %v", err)
	}
}

// BenchmarkResolve measures binding, links and identity for 20 instance
// groups with 100 jobs (5 per group), each group over 2 AZs, at 3 and at 30
// instances a group, and prints the growth: resolution should grow no
// faster than the instances do.
func BenchmarkResolve(b *testing.B) {
	specs := map[string]string{}
	manifest := func(instances int) string {
		var man strings.Builder
		man.WriteString("name: bench\nreleases: [{name: r, version: 1}]\nproperties: {shared: {level: 1}}\ninstance_groups:\n")
		for g := 0; g < 20; g++ {
			fmt.Fprintf(&man, "- name: g%d\n  azs: [z1, z2]\n  instances: %d\n  jobs:\n", g, instances)
			for j := 0; j < 5; j++ {
				name := fmt.Sprintf("job%d-%d", g, j)
				specs[name] = fmt.Sprintf(`name: %s
provides: [{name: p, type: t%d-%d, properties: [port, creds.user]}]
consumes: [{name: c, type: t%d-%d}, {name: o, type: none, optional: true}]
properties:
  port: {default: 80}
  creds.user: {default: u}
  creds.pass: {}
  shared.level: {default: 0}
  opts: {default: {b: 1, a: [{z: 1, y: 2}]}}
`, name, g, j, (g+1)%20, j)
				fmt.Fprintf(&man, "  - {name: %s, release: r, properties: {port: %d, creds: {pass: ((pw))}}}\n", name, 8000+j)
			}
		}
		return man.String()
	}
	vars := variables.NewMapSource(nil)
	vars.Put("pw", "secret")
	sizes := []int{3, 30}
	var inputs []Input
	for _, n := range sizes {
		m, err := Load([]byte(manifest(n)), nil, vars, time.Now())
		if err != nil {
			b.Fatal(err)
		}
		inputs = append(inputs, Input{Manifest: m, Specs: cached(specsFrom(specs)), Variables: vars, Network: network})
	}
	took := make([]time.Duration, len(sizes))
	for b.Loop() {
		for i, in := range inputs {
			start := time.Now()
			if _, err := Resolve(in); err != nil {
				b.Fatal(err)
			}
			took[i] += time.Since(start)
		}
	}
	b.Logf("resolve: %d instances a group %v, %d instances a group %v: %.1f× for %d× the instances",
		sizes[0], took[0], sizes[1], took[1], float64(took[1])/float64(took[0]), sizes[1]/sizes[0])
	b.ReportMetric(float64(took[1])/float64(took[0]), fmt.Sprintf("resolve-%d/%d", sizes[1], sizes[0]))
}

// The layout the copy init containers leave: <root>/<release>/<job>/job.MF.
func TestImageLayoutSpecs(t *testing.T) {
	root := t.TempDir()
	src := filepath.Join(fixtures, "releases", "store", "jobs", "pgstore")
	err := filepath.WalkDir(src, func(p string, e os.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if rel == "spec" {
			rel = "job.MF"
		}
		dst := filepath.Join(root, "store", "pgstore", rel)
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		return os.WriteFile(dst, data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	specs := ImageLayoutSpecs(root)
	s, err := specs("store", "pgstore")
	if err != nil {
		t.Fatal(err)
	}
	again, _ := specs("store", "pgstore")
	if s != again || len(s.Templates) != 3 || s.Provides[0].Name != "database" {
		t.Errorf("%+v", s)
	}
	if _, err := specs("store", "nope"); err == nil {
		t.Error("missing job loaded")
	}
	if _, err := SourceTreeSpecs(nil)("x", "y"); err == nil || err.Error() != "no source tree for release 'x'" {
		t.Errorf("error %v", err)
	}
}

// pgstore ships a properties_schema.json; it checks interpolated values.
func TestPropertiesSchemaOfFixture(t *testing.T) {
	data, _ := os.ReadFile(filepath.Join(fixtures, "deployments", "shop.yml"))
	ops := []OpsFile{{Name: "bad.yml", Data: []byte(`
- {type: replace, path: "/instance_groups/name=db/jobs/name=pgstore/properties/pgstore/max_connections?", value: many}
- {type: replace, path: /instance_groups/name=db/jobs/name=pgstore/properties/pgstore/databases/0, value: {owner: x}}
`)}}
	vars := variables.NewMapSource(nil)
	m, err := Load(data, ops, vars, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	_, err = Resolve(Input{Manifest: m, Specs: fixtureSpecs(), Variables: vars, Network: network})
	want := "- Unable to process instance group 'db'. Errors are:\n  - Job 'pgstore': Error validating properties for pgstore\n" +
		"    object at `/pgstore/databases/0` is missing required properties: name\n" +
		"    value at `/pgstore/max_connections` is not an integer"
	if err == nil || err.Error() != want {
		t.Errorf("error:\n%v\nwant:\n%s", err, want)
	}
}

// Certificate links: the provider group's address becomes a name of the
// certificate.
func TestCertificateConsumesLink(t *testing.T) {
	specs := map[string]string{
		"pg":  "name: pg\nprovides: [{name: conn, type: db}]\nproperties: {tls: {}}",
		"web": "name: web\nconsumes: [{name: db, type: db}]",
	}
	man := `name: dep
releases: [{name: r, version: 1}]
instance_groups:
- {name: pg, instances: 1, jobs: [{name: pg, release: r, provides: {conn: {as: primary}}, properties: {tls: ((tls))}}]}
- {name: app, instances: 1, jobs: [{name: web, release: r}]}
variables:
- {name: ca, type: certificate, options: {is_ca: true, common_name: ca}}
- name: tls
  type: certificate
  options: {ca: ca}
  consumes:
    common_name: {from: primary}
    alternative_name: {from: primary, properties: {wildcard: true}}
`
	d, err := resolveText(t, man, specs, "{}")
	if err != nil {
		t.Fatal(err)
	}
	tls, _ := d.Groups[0].Jobs[0].Properties.Get("tls")
	certPEM, _ := tls.(*yamlvalue.Map).Get("certificate")
	block, _ := pem.Decode([]byte(certPEM.(string)))
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if cert.Subject.CommonName != "dep-pg.shop-ns.svc.cluster.local" || len(cert.DNSNames) != 1 || cert.DNSNames[0] != "*.dep-pg.shop-ns.svc.cluster.local" {
		t.Errorf("CN %s SANs %v", cert.Subject.CommonName, cert.DNSNames)
	}

	_, err = resolveText(t, strings.Replace(man, "common_name: {from: primary}", "common_name: {from: nothing}", 1), specs, "{}")
	if err == nil || err.Error() != "variable 'tls': consumes 'common_name': no link provider 'nothing' in deployment 'dep'" {
		t.Errorf("error %v", err)
	}
	_, err = resolveText(t, strings.Replace(man, "type: certificate\n  options: {ca: ca}", "type: password\n  options: {}", 1), specs, "{}")
	if err == nil || err.Error() != "variables[1].consumes: only certificate variables may consume links" {
		t.Errorf("error %v", err)
	}
}
