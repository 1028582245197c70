package rendering_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bosh-injector/bosh-injector/gather/gathering/secretdata"
	"github.com/bosh-injector/bosh-injector/gather/model/deployment"
	"github.com/bosh-injector/bosh-injector/gather/model/instance"
	"github.com/bosh-injector/bosh-injector/gather/model/variables"
	"github.com/bosh-injector/bosh-injector/gather/render/rendering"
	"github.com/bosh-injector/bosh-injector/gather/render/resolved"
	fixturereleases "github.com/bosh-injector/bosh-injector/test/fixtures"
)

const (
	fixtures  = "../../../test/fixtures"
	goldenDir = "../../../test/golden/template"
)

// setup resolves the fixture deployment, writes group ig's resolved content
// as the Secret mount would hold it, and lays the releases out as the copy
// init containers do.
func setup(t *testing.T, ig string) rendering.Config {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(fixtures, "deployments", "shop.yml"))
	if err != nil {
		t.Fatal(err)
	}
	// The template golden's vars store, so both paths see the same values.
	store, err := os.ReadFile(filepath.Join(goldenDir, "vars-store.yml"))
	if err != nil {
		t.Fatal(err)
	}
	storeCopy := filepath.Join(t.TempDir(), "vars-store.yml")
	if err := os.WriteFile(storeCopy, store, 0o600); err != nil {
		t.Fatal(err)
	}
	vars, err := variables.OpenFile(context.Background(), storeCopy)
	if err != nil {
		t.Fatal(err)
	}
	m, err := deployment.Load(data, nil, vars, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	dirs := map[string]string{}
	jobsSrc := t.TempDir()
	for _, r := range fixturereleases.Releases {
		dirs[r] = filepath.Join(fixtures, "releases", r)
	}
	if err := fixturereleases.LayoutReleases(jobsSrc); err != nil {
		t.Fatal(err)
	}
	net := instance.Network{Namespace: "shop-ns", ClusterDomain: "cluster.local"}
	d, err := deployment.Resolve(deployment.Input{Manifest: m, Specs: deployment.SourceTreeSpecs(dirs), Variables: vars, Network: net})
	if err != nil {
		t.Fatal(err)
	}
	var g *deployment.Group
	for i := range d.Groups {
		if d.Groups[i].Manifest.Name == ig {
			g = &d.Groups[i]
		}
	}
	enc, err := secretdata.Encode(resolved.FromDeployment(d, g, net.ClusterDomain))
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), resolved.Key)
	if err := os.WriteFile(file, enc, 0o644); err != nil {
		t.Fatal(err)
	}
	return rendering.Config{ResolvedFile: file, JobsSrc: jobsSrc, VCAP: t.TempDir(), Namespace: net.Namespace, PodIP: "10.1.0.7"}
}

func TestRenderInstance(t *testing.T) {
	c := setup(t, "bus")
	c.Index = 2
	if err := rendering.Run(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	entries, _ := filepath.Glob(filepath.Join(c.VCAP, "jobs", "bus", "*", "*"))
	if len(entries) == 0 {
		t.Fatal("nothing rendered")
	}
	bpm, err := os.ReadFile(filepath.Join(c.VCAP, "jobs", "bus", "config", "bpm.yml"))
	if err != nil || !strings.Contains(string(bpm), "/var/vcap/packages/") {
		t.Fatalf("bpm.yml: %v %s", err, bpm)
	}
	if _, err := os.Stat(filepath.Join(c.VCAP, "jobs", "bus", "monit")); err != nil {
		t.Error(err)
	}
	for _, d := range []string{"data/bus/tmp", "sys/log/bus", "sys/run/bus"} {
		if info, err := os.Stat(filepath.Join(c.VCAP, d)); err != nil || !info.IsDir() {
			t.Errorf("%s: %v", d, err)
		}
	}
}

// The render container renders only the resolved properties the operator
// accepted for the pod: a Secret replaced after admission is refused.
func TestRenderChecksTheAcceptedDigest(t *testing.T) {
	c := setup(t, "bus")
	data, err := os.ReadFile(c.ResolvedFile)
	if err != nil {
		t.Fatal(err)
	}
	c.ResolvedDigest = secretdata.Digest(map[string][]byte{resolved.Key: data})
	if err := rendering.Run(context.Background(), c); err != nil {
		t.Fatalf("the accepted content: %v", err)
	}
	c.ResolvedDigest = secretdata.Digest(map[string][]byte{resolved.Key: []byte("{}")})
	err = rendering.Run(context.Background(), c)
	if err == nil || !strings.Contains(err.Error(), "not the version the webhook accepted for this pod") {
		t.Fatalf("replaced content: got %v", err)
	}
}

func TestRenderErrors(t *testing.T) {
	c := setup(t, "web")
	tpl := filepath.Join(c.JobsSrc, "shop", "storefront", "templates", "storefront.yml.erb")
	if err := os.WriteFile(tpl, []byte("a: 1\nb: <%= p('storefront.missing') %>\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := rendering.Run(context.Background(), c)
	want := `- Unable to render jobs for instance group 'web'. Errors are:
  - Unable to render templates for job 'storefront'. Errors are:
    - Error filling in template 'storefront.yml.erb' (line 2: Can't find property '["storefront.missing"]')`
	if err == nil || err.Error() != want {
		t.Fatalf("got %v\nwant\n%s", err, want)
	}
	if _, err := os.Stat(filepath.Join(c.VCAP, "jobs")); !os.IsNotExist(err) {
		t.Error("a failed render must write nothing")
	}
	c.Index = 5
	if err := rendering.Run(context.Background(), c); err == nil || !strings.Contains(err.Error(), "beyond instance group 'web'") {
		t.Errorf("index beyond instances: %v", err)
	}
}

// render and `bosh-injector template` produce the same files for an
// instance: one golden, two paths.
func TestRenderMatchesTemplateGolden(t *testing.T) {
	c := setup(t, "web")
	c.Index = 1
	if err := rendering.Run(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(goldenDir, "shop", "web", "1")
	n := 0
	err := filepath.WalkDir(want, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(want, p)
		wantData, _ := os.ReadFile(p)
		got, err := os.ReadFile(filepath.Join(c.VCAP, "jobs", rel))
		if err != nil || string(got) != string(wantData) {
			t.Errorf("%s: render differs from the template golden: %v\n%s", rel, err, got)
		}
		n++
		return nil
	})
	if err != nil || n == 0 {
		t.Fatalf("golden %s: %v (%d files)", want, err, n)
	}
}
