package dns_test

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bosh-injector/bosh-injector/gather/gathering/dns"
	"github.com/bosh-injector/bosh-injector/gather/model/deployment"
	"github.com/bosh-injector/bosh-injector/gather/model/instance"
	"github.com/bosh-injector/bosh-injector/gather/model/variables"
	"github.com/bosh-injector/bosh-injector/gather/model/yamlvalue"
	"github.com/bosh-injector/bosh-injector/gather/names"
)

var update = flag.Bool("update", false, "rewrite the golden files")

const fixtures = "../../../test/fixtures"

var network = instance.Network{Namespace: "shop-ns", ClusterDomain: "cluster.local"}

// shop resolves the fixture deployment with the dns-aliases ops file and
// extra ops files.
func shop(t testing.TB, extra ...string) *deployment.Deployment {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(fixtures, "deployments", "shop.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var ops []deployment.OpsFile
	for i, name := range append([]string{"@dns-aliases.yml"}, extra...) {
		op := []byte(name)
		if file, ok := strings.CutPrefix(name, "@"); ok {
			if op, err = os.ReadFile(filepath.Join(fixtures, "deployments", "ops", file)); err != nil {
				t.Fatal(err)
			}
		}
		ops = append(ops, deployment.OpsFile{Name: "ops-" + string(rune('a'+i)), Data: op})
	}
	vars := variables.NewMapSource(yamlvalue.NewMap())
	m, err := deployment.Load(data, ops, vars, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	dirs := map[string]string{}
	for _, r := range []string{"bus", "store", "shop", "dns"} {
		dirs[r] = filepath.Join(fixtures, "releases", r)
	}
	d, err := deployment.Resolve(deployment.Input{Manifest: m, Specs: deployment.SourceTreeSpecs(dirs), Variables: vars, Network: network})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestGoldenZone(t *testing.T) {
	d := shop(t)
	recs, unions, _, err := dns.Records(d, network, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(unions) != 0 {
		t.Errorf("aliases of one group each gave unions %v", unions)
	}
	golden(t, "shop.zone", dns.ZoneFile(names.DNSZone(d.Name, network.Namespace), recs))
}

// unionOp adds aliases over two groups, as cf-deployment's: `*` targets
// of db and web, and `_` targets of bus and db.
const unionOp = `[
{type: replace, path: /addons/name=bosh-dns-aliases/jobs/0/properties/aliases/-, value: {domain: store.service.shop.internal, targets: [
  {query: "*", instance_group: db, deployment: shop, network: default},
  {query: "*", instance_group: web, deployment: shop, network: default}]}},
{type: replace, path: /addons/name=bosh-dns-aliases/jobs/0/properties/aliases/-, value: {domain: _.backend.service.shop.internal, targets: [
  {query: _, instance_group: bus, deployment: shop, network: default},
  {query: _, instance_group: db, deployment: shop, network: default}]}}]`

// An alias whose `*` targets name two groups is a CNAME to a Service of its
// own, selecting the pods of both; `_` targets over two groups name every
// instance of both.
func TestGoldenUnion(t *testing.T) {
	d := shop(t, unionOp)
	recs, unions, _, err := dns.Records(d, network, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []dns.Union{{Domain: "store.service.shop.internal", Service: "shop-alias-72c53d0f86", Label: "alias.bosh-injector.io/72c53d0f86", Groups: []string{"db", "web"}}}
	if !reflect.DeepEqual(unions, want) {
		t.Errorf("unions\n%+v\nwant\n%+v", unions, want)
	}
	golden(t, "shop-union.zone", dns.ZoneFile(names.DNSZone(d.Name, network.Namespace), recs))
}

func golden(t *testing.T, file string, got []byte) {
	t.Helper()
	golden := filepath.Join("testdata", file)
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v: run go test ./gather/gathering/dns -update", err)
	}
	if string(got) != string(want) {
		t.Errorf("zone differs from %s (run go test ./gather/gathering/dns -update and review the diff):\n%s", golden, got)
	}
}

func TestErrors(t *testing.T) {
	for name, c := range map[string]struct {
		op, want string
	}{
		"missing key": {
			op: `[{type: replace, path: /addons/name=bosh-dns-aliases/jobs/0/properties/aliases/-, value: {domain: x.internal, targets: [{query: "*", instance_group: bus, deployment: shop}]}}]`,
			// The job is an addon, so every group reports it, as the
			// director reports each group's failing template.
			want: "Failed to resolve DNS aliases of deployment 'shop':\n" +
				"  - Job 'bosh-dns-aliases' in instance group 'bus': alias 'x.internal': key not found: \"network\"\n" +
				"  - Job 'bosh-dns-aliases' in instance group 'db': alias 'x.internal': key not found: \"network\"\n" +
				"  - Job 'bosh-dns-aliases' in instance group 'smoke-tests': alias 'x.internal': key not found: \"network\"\n" +
				"  - Job 'bosh-dns-aliases' in instance group 'web': alias 'x.internal': key not found: \"network\"",
		},
		"two deployments": {
			op:   `[{type: replace, path: /addons/name=bosh-dns-aliases/jobs/0/properties/aliases/0/targets/-, value: {query: "*", instance_group: nats, deployment: CF, network: default}}]`,
			want: "Failed to resolve DNS aliases of deployment 'shop':\n  - Alias 'bus.service.shop.internal': its '*' targets name instance groups 'bus' and 'nats' of deployments 'shop' and 'cf': an alias over several groups must target groups of its own deployment 'shop'",
		},
		"placeholder": {
			op:   `[{type: replace, path: /addons/name=bosh-dns-aliases/jobs/0/properties/aliases/-, value: {domain: y.internal, targets: [{query: _, instance_group: bus, deployment: shop, network: default}]}}]`,
			want: "Failed to resolve DNS aliases of deployment 'shop':\n  - Alias 'y.internal': query '_' answers '<instance-id>.<domain>': the domain must start with '_.'",
		},
		"bad name": {
			op:   `[{type: replace, path: /addons/name=bosh-dns-aliases/jobs/0/properties/aliases/-, value: {domain: "a b.internal", targets: [{query: "*", instance_group: bus, deployment: shop, network: default}]}}]`,
			want: "Failed to resolve DNS aliases of deployment 'shop':\n  - Alias 'a b.internal': 'a b.internal' is not a DNS name: label 'a b' holds ' '",
		},
		"other deployment": {
			op:   `[{type: replace, path: /addons/name=bosh-dns-aliases/jobs/0/properties/aliases/-, value: {domain: _.z.internal, targets: [{query: _, instance_group: nats, deployment: cf, network: default}]}}]`,
			want: "Failed to resolve DNS aliases of deployment 'shop':\n  - Alias '_.z.internal': instance group 'nats' does not exist in deployment 'cf' of namespace shop-ns (as that deployment was last gathered)",
		},
		"other deployment's group gone": {
			op:   `[{type: replace, path: /addons/name=bosh-dns-aliases/jobs/0/properties/aliases/-, value: {domain: gone.internal, targets: [{query: "*", instance_group: router, deployment: CF, network: default}]}}]`,
			want: "Failed to resolve DNS aliases of deployment 'shop':\n  - Alias 'gone.internal': instance group 'router' does not exist in deployment 'CF' of namespace shop-ns (as that deployment was last gathered)",
		},
		// A failure to look is the gathering's, not the alias's.
		"lookup failure": {
			op:   `[{type: replace, path: /addons/name=bosh-dns-aliases/jobs/0/properties/aliases/-, value: {domain: api.internal, targets: [{query: "*", instance_group: api, deployment: CF, network: default}]}}]`,
			want: "resolving DNS alias 'api.internal': listing: connection refused",
		},
	} {
		t.Run(name, func(t *testing.T) {
			_, _, _, err := dns.Records(shop(t, c.op), network, cfRemote)
			if err == nil || err.Error() != c.want {
				t.Errorf("got error\n%v\nwant\n%s", err, c.want)
			}
		})
	}
}

// A target naming a group the deployment does not have (cf-deployment's
// `_.cell.service.cf.internal` names windows2019-cell, which only an ops
// file adds) answers nothing and warns; the alias's other targets answer.
func TestMissingTargetGroup(t *testing.T) {
	op := `[{type: replace, path: /addons/name=bosh-dns-aliases/jobs/0/properties/aliases/-, value: {domain: _.cell.service.shop.internal, targets: [
  {query: _, instance_group: bus, deployment: shop, network: default},
  {query: _, instance_group: windows2019-cell, deployment: shop, network: default},
  {query: _, instance_group: isolated-diego-cell, deployment: shop, network: default}]}},
{type: replace, path: /addons/name=bosh-dns-aliases/jobs/0/properties/aliases/-, value: {domain: cache.service.shop.internal, targets: [{query: "*", instance_group: cache, deployment: shop, network: default}]}}]`
	d := shop(t, op)
	recs, _, warnings, err := dns.Records(d, network, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"job 'bosh-dns-aliases', alias '_.cell.service.shop.internal': target instance group 'windows2019-cell' is not in deployment 'shop': it answers nothing, as bosh-dns answers nothing for a group without instances",
		"job 'bosh-dns-aliases', alias '_.cell.service.shop.internal': target instance group 'isolated-diego-cell' is not in deployment 'shop': it answers nothing, as bosh-dns answers nothing for a group without instances",
		"job 'bosh-dns-aliases', alias 'cache.service.shop.internal': target instance group 'cache' is not in deployment 'shop': it answers nothing, as bosh-dns answers nothing for a group without instances",
	}
	if !slices.Equal(warnings, want) {
		t.Errorf("warnings\n%s\nwant\n%s", strings.Join(warnings, "\n"), strings.Join(want, "\n"))
	}
	var cells int
	for _, r := range recs {
		if strings.HasPrefix(r.Name, "cache.") {
			t.Errorf("an alias of a missing group has record %v", r)
		}
		if strings.HasSuffix(r.Name, ".cell.service.shop.internal") {
			cells++
		}
	}
	if bus := len(d.Groups[slices.IndexFunc(d.Groups, func(g deployment.Group) bool { return g.Manifest.Name == "bus" })].Instances); cells != bus {
		t.Errorf("%d records under cell.service.shop.internal, want one per bus instance (%d)", cells, bus)
	}
}

// cfRemote knows deployment "cf", written "CF" in aliases, with two nats
// instances; looking for group api fails.
func cfRemote(dep, group string) (string, int, bool, error) {
	if group == "api" {
		return "", 0, false, errors.New("listing: connection refused")
	}
	return "cf", 2, dep == "CF" && group == "nats", nil
}

// A target in another deployment of the namespace resolves to that
// deployment's Services: its group's for `*`, its instances' for `_`.
func TestOtherDeployment(t *testing.T) {
	op := `[{type: replace, path: /addons/name=bosh-dns-aliases/jobs/0/properties/aliases/-, value: {domain: _.nats.service.cf.internal, targets: [{query: _, instance_group: nats, deployment: CF, network: default}]}},
{type: replace, path: /addons/name=bosh-dns-aliases/jobs/0/properties/aliases/-, value: {domain: nats.service.cf.internal, targets: [{query: "*", instance_group: nats, deployment: CF, network: default}]}}]`
	recs, unions, _, err := dns.Records(shop(t, op), network, cfRemote)
	if err != nil {
		t.Fatal(err)
	}
	if len(unions) != 0 {
		t.Errorf("a `*` target of one group gave unions %v", unions)
	}
	var got []string
	for _, r := range recs {
		if strings.HasSuffix(r.Name, "nats.service.cf.internal") {
			got = append(got, r.Name+" "+r.Target)
		}
	}
	want := []string{
		instance.ID("cf", "nats", 0) + ".nats.service.cf.internal cf-nats-0.shop-ns.svc.cluster.local.",
		instance.ID("cf", "nats", 1) + ".nats.service.cf.internal cf-nats-1.shop-ns.svc.cluster.local.",
		"nats.service.cf.internal cf-nats.shop-ns.svc.cluster.local.",
	}
	if strings.Join(got, "\n") != strings.Join(sorted(want), "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(sorted(want), "\n"))
	}
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

// Target fields bosh-injector cannot answer as bosh-dns would are named,
// with the job and alias; the fixture's targets (network default, domain
// bosh or none) are honoured.
func TestUnhonoured(t *testing.T) {
	if got := dns.Unhonoured(shop(t)); len(got) != 0 {
		t.Errorf("fixture aliases: %q", got)
	}
	op := `[{type: replace, path: /addons/name=bosh-dns-aliases/jobs/0/properties/aliases/-, value: {domain: _.private.internal, targets: [
  {query: "*", instance_group: db, deployment: shop, network: private, domain: bosh},
  {query: _, instance_group: db, deployment: shop, network: private, domain: example}]}}]`
	d := shop(t, op)
	if _, _, _, err := dns.Records(d, network, nil); err != nil {
		t.Fatal(err)
	}
	got := dns.Unhonoured(d)
	where := "job 'bosh-dns-aliases', alias '_.private.internal', target instance group 'db' of deployment 'shop': "
	want := []string{
		where + "field 'domain' ('example') is not honoured: every instance's BOSH names are under 'bosh', which answers the alias",
		where + "field 'network' ('private') is not honoured: instances have the one network 'default', whose addresses answer the alias",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// bosh-dns's short health queries, as cf-deployment's aliases use them
// (auctioneer.service.cf.internal: q-s4): all instances are the group's
// Service, healthy ones its healthy Service.
func TestHealthQueries(t *testing.T) {
	op := `[{type: replace, path: /addons/name=bosh-dns-aliases/jobs/0/properties/aliases/-, value: {domain: all.shop.internal, targets: [{query: q-s4, instance_group: db, deployment: shop, network: default}]}},
{type: replace, path: /addons/name=bosh-dns-aliases/jobs/0/properties/aliases/-, value: {domain: group.shop.internal, targets: [{query: "*", instance_group: db, deployment: shop, network: default}]}},
{type: replace, path: /addons/name=bosh-dns-aliases/jobs/0/properties/aliases/-, value: {domain: healthy.shop.internal, targets: [{query: q-s3, instance_group: db, deployment: shop, network: default}]}}]`
	recs, _, _, err := dns.Records(shop(t, op), network, nil)
	if err != nil {
		t.Fatal(err)
	}
	target := map[string]string{}
	for _, r := range recs {
		target[r.Name] = r.Target
	}
	_, healthy, err := network.SubsetAddress("shop", "db", instance.Subset{Healthy: true})
	if err != nil {
		t.Fatal(err)
	}
	if target["all.shop.internal"] == "" || target["all.shop.internal"] != target["group.shop.internal"] || strings.TrimSuffix(target["healthy.shop.internal"], ".") != healthy {
		t.Errorf("all %q, group %q, healthy %q (want %q)", target["all.shop.internal"], target["group.shop.internal"], target["healthy.shop.internal"], healthy)
	}
	_, _, _, err = dns.Records(shop(t, `[{type: replace, path: /addons/name=bosh-dns-aliases/jobs/0/properties/aliases/-, value: {domain: one.shop.internal, targets: [{query: q-i1, instance_group: db, deployment: shop, network: default}]}}]`), network, nil)
	if err == nil || !strings.Contains(err.Error(), "query 'q-i1' of instance group 'db' in deployment 'shop' is not supported") {
		t.Errorf("error %v", err)
	}
}
