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
	"github.com/bosh-injector/bosh-injector/gather/render/ruby"
	"github.com/bosh-injector/bosh-injector/test/controlplane"
	"github.com/bosh-injector/bosh-injector/test/fixtures"
)

// cfVariables is a manifest with the variables of cf-deployment's shape:
// 94 keys, of which 6 CAs, 50 certificates they sign, 34 passwords, 3 rsa
// and 1 ssh key, every one referenced.
func cfVariables() []byte {
	var m strings.Builder
	m.WriteString("name: cf\nvariables:\n")
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
	c := clientFor("cf")
	load := func() time.Duration {
		start := time.Now()
		if _, err := deployment.Load(cfVariables(), nil, director.NewSource(ctx, c, "bench", "cf", nil), time.Now()); err != nil {
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

	// Whole gatherings, templates rendered and Secrets written: the shop
	// deployment with those 94 variables besides its own, first when the
	// server generates every one (from its spare keys), then again when
	// every one exists.
	jobs := b.TempDir()
	if err := fixtures.LayoutReleases(jobs); err != nil {
		b.Fatal(err)
	}
	shop, err := fixtures.ShopManifest()
	if err != nil {
		b.Fatal(err)
	}
	if _, err := fixtures.ApplyManifest(ctx, cp.Client, ns, shop, deployment.OpsFile{Name: "ops-01-cf-variables.yml", Data: cfVariablesOps(b)}); err != nil {
		b.Fatal(err)
	}
	shopClient := clientFor("shop")
	gather := func() time.Duration {
		start := time.Now()
		_, err := gathering.Run(ctx, cp.Client, gathering.Config{Namespace: ns, ManifestSecret: fixtures.ManifestSecret, JobsDir: jobs, ClusterDomain: "cluster.local",
			ConfigServer: &gathering.ConfigServer{Client: shopClient, Director: "bench", Deployment: "shop"}}, gathering.NewRenderBPM(ctx, ruby.Renderer{}), time.Now())
		if err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	for generate.SpareCount() < 128 {
		time.Sleep(10 * time.Millisecond)
	}
	generated := gather()
	again := gather()
	b.Logf("gathering the shop deployment with them: every variable generated (spare keys) %v, every one existing %v (%.2f×)",
		generated.Round(time.Millisecond), again.Round(time.Millisecond), float64(generated)/float64(again))
	b.ReportMetric(float64(generated.Milliseconds()), "gather-generated-ms")
	b.ReportMetric(float64(again.Milliseconds()), "gather-existing-ms")
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
