package gathering_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bosh-injector/bosh-injector/gather/gathering"
	"github.com/bosh-injector/bosh-injector/gather/names"
	"github.com/bosh-injector/bosh-injector/gather/render/ruby"
	"github.com/bosh-injector/bosh-injector/test/controlplane"
	"github.com/bosh-injector/bosh-injector/test/fixtures"
)

// generated writes a release of 100 jobs in the image layout under dir and
// returns a manifest of 20 instance groups of 5 jobs each, 3 instances over
// two AZs, every group consuming the previous group's link.
func generated(b *testing.B, dir string) []byte {
	b.Helper()
	for j := range 100 {
		job := fmt.Sprintf("job%02d", j)
		var spec strings.Builder
		fmt.Fprintf(&spec, "name: %s\ntemplates:\n  bpm.yml.erb: config/bpm.yml\n  config.yml.erb: config/config.yml\n", job)
		spec.WriteString("provides:\n- {name: api, type: api-" + job + ", properties: [port]}\n")
		if j >= 5 {
			fmt.Fprintf(&spec, "consumes:\n- {name: upstream, type: api-job%02d}\n", j-5)
		}
		spec.WriteString("properties:\n  port: {default: 8080}\n")
		for p := range 20 {
			fmt.Fprintf(&spec, "  settings.key%d: {default: value-%d-with-some-realistic-length}\n", p, p)
		}
		files := map[string]string{
			"job.MF": spec.String(),
			"monit":  "",
			"templates/bpm.yml.erb": "processes:\n- name: " + job + "\n  executable: /var/vcap/packages/" + job + "/bin/run\n" +
				"  args: [--index, \"<%= spec.index %>\"]\n  env: {PORT: \"<%= p('port') %>\"}\n  limits: {memory: 256M}\n",
			"templates/config.yml.erb": "port: <%= p('port') %>\n<% p('settings').each do |k, v| %><%= k %>: <%= v %>\n<% end %>",
		}
		if err := fixtures.WriteTree(filepath.Join(dir, "gen", job), files); err != nil {
			b.Fatal(err)
		}
	}
	var m strings.Builder
	m.WriteString("name: big\nreleases: [{name: gen, version: '1', image: localhost/gen:1}]\n" + benchUpdate + "instance_groups:\n")
	for g := range 20 {
		fmt.Fprintf(&m, "- name: group%02d\n  azs: [z1, z2]\n  instances: 3\n  networks: [{name: default}]\n  jobs:\n", g)
		for j := range 5 {
			fmt.Fprintf(&m, "  - {name: job%02d, release: gen}\n", g*5+j)
		}
	}
	return []byte(m.String())
}

// BenchmarkGather gathers the generated deployment (bind, links, identity,
// one Ruby batch for all 60 instances' templates, Secrets and Services),
// then once more unchanged, prints the second against the first and
// reports the largest Secret written.
func BenchmarkGather(b *testing.B) {
	// The package's control plane, which gatherAccepted reads through as
	// the suite's does.
	var err error
	if cp, err = controlplane.Start(controlplane.Options{}); err != nil {
		b.Fatal(err)
	}
	defer cp.Stop()
	ctx := context.Background()
	dir := b.TempDir()
	manifest := generated(b, dir)
	if err := cp.Client.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "big", Namespace: "default", Labels: map[string]string{names.LabelDeployment: "big"}},
		Data:       map[string][]byte{names.ManifestKey: manifest},
	}); err != nil {
		b.Fatal(err)
	}
	cfg := gathering.Config{Namespace: "default", ManifestSecret: "big", JobsDir: dir, ClusterDomain: "cluster.local"}
	gather := func() time.Duration {
		_, took, err := gatherTimed(cp.Client, cfg, gathering.NewRenderBPM(ctx, ruby.Renderer{}))
		if err != nil {
			b.Fatal(err)
		}
		return took.gather
	}
	var first time.Duration
	for b.Loop() {
		if took := gather(); first == 0 {
			first = took
		}
	}
	again := gather()
	b.Logf("first gathering %v, unchanged again %v (%.2f of the first)", first, again, float64(again)/float64(first))
	b.ReportMetric(float64(again)/float64(first), "again/first")
	var secrets corev1.SecretList
	if err := cp.Client.List(ctx, &secrets, client.InNamespace("default"), client.HasLabels{names.LabelSecretKind}); err != nil {
		b.Fatal(err)
	}
	largest := 0
	for _, s := range secrets.Items {
		size := 0
		for _, v := range s.Data {
			size += len(v)
		}
		largest = max(largest, size)
	}
	b.ReportMetric(float64(first.Milliseconds()), "first-gather-ms")
	b.ReportMetric(float64(largest), "largest-secret-bytes")
	b.ReportMetric(float64(len(secrets.Items)), "secrets")
}

// scaled writes three jobs under dir/gen and returns a deployment of two
// instance groups of n instances over two AZs: db provides a link, web runs
// a job rendering bpm.yml per instance and one consuming db's link in its
// bpm.yml and config.
func scaled(b *testing.B, dir string, n int) []byte {
	b.Helper()
	jobs := map[string]map[string]string{
		"db": {
			"job.MF":                "name: db\ntemplates: {bpm.yml.erb: config/bpm.yml}\nprovides:\n- {name: db, type: db, properties: [port]}\nproperties:\n  port: {default: 5432}\n",
			"templates/bpm.yml.erb": "processes:\n- name: db\n  executable: /var/vcap/packages/db/bin/run\n  args: [--index, \"<%= spec.index %>\", --port, \"<%= p('port') %>\"]\n",
		},
		"web": {
			"job.MF":                "name: web\ntemplates: {bpm.yml.erb: config/bpm.yml}\n",
			"templates/bpm.yml.erb": "processes:\n- name: web\n  executable: /var/vcap/packages/web/bin/run\n  args: [--index, \"<%= spec.index %>\"]\n",
		},
		// client renders, per instance, a bpm.yml and a config from the
		// consumed link's address and properties: what a link costs a
		// template, not a template that walks every peer (whose output is
		// itself quadratic, for the director too).
		"client": {
			"job.MF": "name: client\ntemplates: {bpm.yml.erb: config/bpm.yml, db.erb: config/db}\nconsumes:\n- {name: db, type: db}\n",
			"templates/bpm.yml.erb": "processes:\n- name: client\n  executable: /var/vcap/packages/client/bin/run\n" +
				"  args: [--db, \"<%= link('db').address %>:<%= link('db').p('port') %>\"]\n",
			"templates/db.erb": "host: <%= link('db').address %>\nport: <%= link('db').p('port') %>\nbootstrap: <%= spec.bootstrap %>\n",
		},
	}
	for job, files := range jobs {
		files["monit"] = ""
		if err := fixtures.WriteTree(filepath.Join(dir, "gen", job), files); err != nil {
			b.Fatal(err)
		}
	}
	return fmt.Appendf(nil, `name: scale
releases: [{name: gen, version: '1', image: localhost/gen:1}]
`+benchUpdate+`instance_groups:
- {name: db, azs: [z1, z2], instances: %d, networks: [{name: default}], jobs: [{name: db, release: gen}]}
- {name: web, azs: [z1, z2], instances: %d, networks: [{name: default}], jobs: [{name: web, release: gen}, {name: client, release: gen}]}
`, n, n)
}

// BenchmarkGatherInstances gathers a deployment of two groups of 10, 100
// and 1000 instances (after an unmeasured one of 5), one consuming the other's link, on a real API server,
// then gathers it again unchanged, and prints the growth from size to size
// and the second gathering against the first. That the second writes
// nothing is a test (gathering_test.go); here it is counted. A gathering is
// the Job's run; the job runner's plan and acceptance around it are printed
// beside it: run back to back here, the plan's consistent list of Secrets
// right after the previous acceptance wrote its record waits for the API
// server's watch cache to catch up (about 0.1 s on this idle one), which a
// gathering Job, started seconds after, does not meet.
func BenchmarkGatherInstances(b *testing.B) {
	// The package's control plane, which gatherAccepted reads through as
	// the suite's does.
	var err error
	if cp, err = controlplane.Start(controlplane.Options{}); err != nil {
		b.Fatal(err)
	}
	defer cp.Stop()
	ctx := context.Background()
	base, err := client.NewWithWatch(cp.Config, client.Options{})
	if err != nil {
		b.Fatal(err)
	}
	c, writes := counting(base)
	// A deployment gathered twice first, unmeasured: a new API server's
	// first list of a kind waits for its watch cache (about 80 ms here),
	// which a cluster's long-running one never does.
	sizes := []int{5, 10, 100, 1000}
	for b.Loop() {
		var firsts []time.Duration
		for i, n := range sizes {
			warmUp := i == 0
			ns := fmt.Sprintf("scale-%d", n)
			dir := b.TempDir()
			manifest := scaled(b, dir, n)
			if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
				b.Fatal(err)
			}
			if err := c.Create(ctx, &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: "scale", Namespace: ns, Labels: map[string]string{names.LabelDeployment: "scale"}},
				Data:       map[string][]byte{names.ManifestKey: manifest},
			}); err != nil {
				b.Fatal(err)
			}
			cfg := gathering.Config{Namespace: ns, ManifestSecret: "scale", JobsDir: dir, ClusterDomain: "cluster.local"}
			gather := func() (phases, int64) {
				writes.Store(0)
				_, took, err := gatherTimed(c, cfg, gathering.NewRenderBPM(ctx, ruby.Renderer{}))
				if err != nil {
					b.Fatal(err)
				}
				return took, writes.Load()
			}
			firstTook, firstWrites := gather()
			againTook, againWrites := gather()
			if warmUp {
				continue
			}
			first, again := firstTook.gather, againTook.gather
			growth := ""
			if len(firsts) > 0 {
				prev := firsts[len(firsts)-1]
				growth = fmt.Sprintf(" | %.1f× the %d-instance gathering", float64(first)/float64(prev), sizes[i-1])
				b.ReportMetric(float64(first)/float64(prev), fmt.Sprintf("gather-%d/%d", n, sizes[i-1]))
			}
			firsts = append(firsts, first)
			b.Logf("%4d instances a group: first %6.2f s (%4d writes), again %6.2f s (%d writes, %.2f of the first)%s | the runner's plan and acceptance: first %3.0f ms, again %3.0f ms",
				n, first.Seconds(), firstWrites, again.Seconds(), againWrites, float64(again)/float64(first), growth, ms(firstTook.runner), ms(againTook.runner))
			b.ReportMetric(first.Seconds(), fmt.Sprintf("gather-%d-s", n))
			b.ReportMetric(float64(again)/float64(first), fmt.Sprintf("again/first-%d", n))
		}
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// benchUpdate is the update block a deployment manifest needs.
const benchUpdate = "update: {canaries: 1, max_in_flight: 1, canary_watch_time: 1000, update_watch_time: 1000}\n"
