package configserver_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"gopkg.in/yaml.v3"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bosh-injector/bosh-injector/gather/configserver"
	"github.com/bosh-injector/bosh-injector/gather/configserver/director"
	"github.com/bosh-injector/bosh-injector/gather/configserver/generate"
	"github.com/bosh-injector/bosh-injector/gather/configserver/store"
	"github.com/bosh-injector/bosh-injector/gather/gathering"
	"github.com/bosh-injector/bosh-injector/gather/model/deployment"
	"github.com/bosh-injector/bosh-injector/gather/names"
	"github.com/bosh-injector/bosh-injector/gather/releaseimage/releasedir"
	"github.com/bosh-injector/bosh-injector/gather/render/ruby"
	"github.com/bosh-injector/bosh-injector/test/controlplane"
	"github.com/bosh-injector/bosh-injector/test/fixtures"
)

// cfVariables is a manifest with the variables of cf-deployment's shape:
// 94 keys, of which 6 CAs, 50 certificates they sign, 34 passwords, 3 rsa
// and 1 ssh key, every one referenced.
func cfVariables() []byte {
	var m strings.Builder
	m.WriteString("name: cf-shaped\nvariables:\n")
	var refs []string
	add := func(name, def string) {
		fmt.Fprintf(&m, "- {name: %s, %s}\n", name, def)
		refs = append(refs, name)
	}
	for i := range 6 {
		add(fmt.Sprintf("ca_%d", i), fmt.Sprintf("type: certificate, options: {is_ca: true, common_name: ca-%d}", i))
	}
	for i := range 50 {
		add(fmt.Sprintf("tls_%d", i), fmt.Sprintf("type: certificate, options: {ca: ca_%d, common_name: svc-%d.service.cf.internal, extended_key_usage: [server_auth, client_auth]}", i%6, i))
	}
	for i := range 34 {
		add(fmt.Sprintf("password_%d", i), "type: password")
	}
	for i := range 3 {
		add(fmt.Sprintf("rsa_%d", i), "type: rsa")
	}
	add("ssh_0", "type: ssh")
	m.WriteString("tags:\n")
	for _, r := range refs {
		fmt.Fprintf(&m, "  %s: ((%s))\n", r, r)
	}
	return []byte(m.String())
}

// BenchmarkGenerate interpolates the variables of a cf-deployment-sized
// manifest through the embedded server as a gathering does: first when
// the server generates every one, then again when every one exists, and
// prints the first against the second.
func BenchmarkGenerate(b *testing.B) {
	cp, err := controlplane.Start(controlplane.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer cp.Stop()
	ctx := context.Background()
	const ns = "bench"
	if err := cp.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		b.Fatal(err)
	}
	serving, err := fixtures.NewServing(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	srv, err := fixtures.StartConfigServer(ctx, cp.Config, configserver.Options{Namespace: ns, Directors: director.Directors{Default: "bench"}, Audience: director.Audience,
		SigningKeySecret: "token-key", CertDir: serving.Dir}, serving, logr.Discard())
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Stop()
	// clientFor is a client of the server with a token of deployment
	// d's gathering ServiceAccount, as its Job's pod has.
	clientFor := func(d string) *director.Client {
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: d + "-gather",
			Labels: map[string]string{names.LabelManagedBy: names.ManagedBy}, Annotations: map[string]string{director.AnnotationDeployment: d}}}
		if err := cp.Client.Create(ctx, sa); err != nil {
			b.Fatal(err)
		}
		tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{Audiences: []string{director.Audience}, ExpirationSeconds: ptr.To[int64](3600)}}
		if err := cp.Client.SubResource("token").Create(ctx, sa, tr); err != nil {
			b.Fatal(err)
		}
		tokenFile := filepath.Join(b.TempDir(), "token")
		if err := os.WriteFile(tokenFile, []byte(tr.Status.Token), 0o600); err != nil {
			b.Fatal(err)
		}
		c, err := director.NewClient(srv.URL+"/api/", serving.Client, director.TokenFile(tokenFile))
		if err != nil {
			b.Fatal(err)
		}
		return c
	}
	c := clientFor("cf-shaped")
	load := func() time.Duration {
		start := time.Now()
		if _, err := deployment.Load(cfVariables(), nil, director.NewSource(ctx, c, "bench", "cf-shaped", nil), time.Now()); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	var first, spare time.Duration
	for b.Loop() {
		if took := load(); first == 0 {
			first = took
		}
	}
	existing := load()
	// Every variable generated again, from the server's keys made ahead
	// (--spare-keys, 128 by default), as after it idled a moment.
	if err := cp.Client.DeleteAllOf(ctx, &corev1.Secret{}, client.InNamespace(ns), client.HasLabels{store.LabelCredential}); err != nil {
		b.Fatal(err)
	}
	ctx2, cancel := context.WithCancel(ctx)
	defer cancel()
	go generate.PrepareKeys(ctx2, 128)
	for generate.SpareCount() < 128 {
		time.Sleep(10 * time.Millisecond)
	}
	spare = load()
	b.Logf("94 variables: every one generated %v, with spare keys %v, every one existing %v (%.1f×, %.1f×)", first.Round(time.Millisecond),
		spare.Round(time.Millisecond), existing.Round(time.Millisecond), float64(first)/float64(existing), float64(spare)/float64(existing))
	b.ReportMetric(float64(first.Milliseconds()), "generated-ms")
	b.ReportMetric(float64(spare.Milliseconds()), "spare-keys-ms")
	b.ReportMetric(float64(existing.Milliseconds()), "existing-ms")

	// Whole first gatherings, templates rendered and every Secret and
	// Service written, of the shop deployment with those 94 variables
	// besides its own: in one namespace while the server generates every
	// one (from its spare keys), then in another once every one exists
	// (as after `credhub import` from a director), so the two differ only
	// in generation; then the first namespace's gathering again, which
	// writes nothing new.
	jobs := b.TempDir()
	if err := fixtures.LayoutReleases(jobs); err != nil {
		b.Fatal(err)
	}
	shop, err := fixtures.ShopManifest()
	if err != nil {
		b.Fatal(err)
	}
	shopClient := clientFor("shop")
	gather := func(namespace string) time.Duration {
		start := time.Now()
		_, err := gathering.Run(ctx, cp.Client, gathering.Config{Namespace: namespace, ManifestSecret: fixtures.ManifestSecret, JobsDir: jobs, ClusterDomain: "cluster.local",
			ConfigServer: &gathering.ConfigServer{Client: shopClient, Director: "bench", Deployment: "shop"}}, gathering.NewRenderBPM(ctx, ruby.Renderer{}), time.Now())
		if err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	for _, namespace := range []string{"shop-generated", "shop-existing"} {
		if err := cp.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil {
			b.Fatal(err)
		}
		if _, err := fixtures.ApplyManifest(ctx, cp.Client, namespace, shop, deployment.OpsFile{Name: "ops-01-cf-variables.yml", Data: cfVariablesOps(b)}); err != nil {
			b.Fatal(err)
		}
	}
	for generate.SpareCount() < 128 {
		time.Sleep(10 * time.Millisecond)
	}
	generated := gather("shop-generated")
	existed := gather("shop-existing")
	again := gather("shop-generated")
	b.Logf("first gatherings of the shop deployment with them: every variable generated (spare keys) %v, every one existing %v (%.2f×); gathered again, nothing new to write: %v",
		generated.Round(time.Millisecond), existed.Round(time.Millisecond), float64(generated)/float64(existed), again.Round(time.Millisecond))
	b.ReportMetric(float64(generated.Milliseconds()), "gather-generated-ms")
	b.ReportMetric(float64(existed.Milliseconds()), "gather-existing-ms")
	b.ReportMetric(float64(again.Milliseconds()), "gather-again-ms")

	// The same for cf-deployment itself when its checkouts are given (as
	// to make acceptance-cf, which CI cannot fetch).
	gatherCF(b, ctx, cp.Client, clientFor("cf"), func(namespace string, cs *gathering.ConfigServer, jobs string) time.Duration {
		start := time.Now()
		_, err := gathering.Run(ctx, cp.Client, gathering.Config{Namespace: namespace, ManifestSecret: cfManifestSecret, JobsDir: jobs, ClusterDomain: "cluster.local",
			ConfigServer: cs}, gathering.NewRenderBPM(ctx, ruby.Renderer{}), time.Now())
		if err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	})
}

// cfReleases are the variables naming the release checkouts of
// cf-deployment's routing and logging slice, as make acceptance-cf takes
// them.
var cfReleases = []string{"NATS_RELEASE", "ROUTING_RELEASE", "DNS_ALIASES_RELEASE", "LOGGREGATOR_RELEASE", "LOGGREGATOR_AGENT_RELEASE",
	"LOG_CACHE_RELEASE", "STATSD_INJECTOR_RELEASE"}

const cfManifestSecret = "cf-manifest"

// gatherCF gathers cf-deployment with the acceptance's routing and
// logging slice (its groups; every one of its variables) twice for the
// first time, as BenchmarkGenerate gathers the shop: while the server
// generates every variable, then in another namespace once every one
// exists. Without CF_DEPLOYMENT it says what it would need.
func gatherCF(b *testing.B, ctx context.Context, c client.Client, cf *director.Client, gather func(namespace string, cs *gathering.ConfigServer, jobs string) time.Duration) {
	dir := os.Getenv("CF_DEPLOYMENT")
	if dir == "" {
		b.Logf("cf-deployment itself: not gathered; give CF_DEPLOYMENT and %s checkouts (make bench CF_DEPLOYMENT=dir …)", strings.Join(cfReleases, ", "))
		return
	}
	jobs := b.TempDir()
	// Each release's image, as release-image's ops file names them; the
	// gathering reads only the jobs laid out under jobs.
	var images strings.Builder
	for _, v := range cfReleases {
		release := os.Getenv(v)
		if release == "" {
			b.Fatalf("CF_DEPLOYMENT is given, %s is not", v)
		}
		name, err := releasedir.Name(release)
		if err != nil {
			b.Fatal(err)
		}
		if err := fixtures.LayoutJobs(release, filepath.Join(jobs, name)); err != nil {
			b.Fatal(err)
		}
		fmt.Fprintf(&images, "- type: replace\n  path: /releases/name=%s/image?\n  value: localhost/cf/%s:bench\n", name, name)
	}
	data, err := os.ReadFile(filepath.Join(dir, "cf-deployment.yml"))
	if err != nil {
		b.Fatal(err)
	}
	var ops []deployment.OpsFile
	for _, name := range []string{"logging.yml", "local.yml"} {
		op, err := os.ReadFile(filepath.Join("..", "..", "test", "acceptance", "cf-slice", name))
		if err != nil {
			b.Fatal(err)
		}
		ops = append(ops, deployment.OpsFile{Name: name, Data: op})
	}
	ops = append(ops, deployment.OpsFile{Name: "images.yml", Data: []byte(images.String())})
	// system_domain, which cf-deployment does not generate, given as
	// `credhub set` gives it.
	creds := &store.Store{Client: c, Namespace: "bench"}
	if _, err := creds.Write(ctx, director.Name("bench", "cf", "system_domain"), func(*store.Version) (*store.Version, error) {
		return &store.Version{Type: "value", Value: []byte(`"cf.test"`)}, nil
	}); err != nil {
		b.Fatal(err)
	}
	for _, namespace := range []string{"cf-generated", "cf-existing"} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil {
			b.Fatal(err)
		}
		if _, err := fixtures.Apply(ctx, c, namespace, "cf", cfManifestSecret, data, ops...); err != nil {
			b.Fatal(err)
		}
	}
	for generate.SpareCount() < 128 {
		time.Sleep(10 * time.Millisecond)
	}
	cs := &gathering.ConfigServer{Client: cf, Director: "bench", Deployment: "cf"}
	generated := gather("cf-generated", cs, jobs)
	existed := gather("cf-existing", cs, jobs)
	set, err := creds.All(ctx)
	if err != nil {
		b.Fatal(err)
	}
	n := 0
	for _, v := range set {
		if strings.HasPrefix(v.Name, "/bench/cf/") && v.Name != "/bench/cf/system_domain" {
			n++
		}
	}
	b.Logf("first gatherings of cf-deployment's routing and logging slice (%d variables generated): every variable generated (spare keys) %v, every one existing %v (%.2f×)",
		n, generated.Round(time.Millisecond), existed.Round(time.Millisecond), float64(generated)/float64(existed))
	b.ReportMetric(float64(generated.Milliseconds()), "cf-generated-ms")
	b.ReportMetric(float64(existed.Milliseconds()), "cf-existing-ms")
}

// cfVariablesOps is an ops file adding cfVariables' variables to a
// manifest.
func cfVariablesOps(b *testing.B) []byte {
	var doc struct {
		Variables []any `yaml:"variables"`
	}
	if err := yaml.Unmarshal(cfVariables(), &doc); err != nil {
		b.Fatal(err)
	}
	var ops []map[string]any
	for _, v := range doc.Variables {
		ops = append(ops, map[string]any{"type": "replace", "path": "/variables/-", "value": v})
	}
	out, err := yaml.Marshal(ops)
	if err != nil {
		b.Fatal(err)
	}
	return out
}
