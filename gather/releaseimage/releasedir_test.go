package releaseimage_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bosh-injector/bosh-injector/gather/names"
	"github.com/bosh-injector/bosh-injector/gather/releaseimage"
	"github.com/bosh-injector/bosh-injector/test/fixtures"
)

// TestReleaseDirectory builds the fixture release directory greeter, its
// vendored package from the toolbox directory given beside it, for a
// manifest using only its job hello: greeter and tools compile on the
// stemcell, extra (only the unused job needs it) does not, and the
// image's label says so. podman pulls the image and greeter's script runs,
// reading its blob.
func TestReleaseDirectory(t *testing.T) {
	dirs := filepath.Join(fixtures.Dir(), "releasedirs")
	cfg, engine := config(t, t.TempDir(), filepath.Join(dirs, "greeter"), filepath.Join(dirs, "toolbox"))
	cfg.Push = true
	cfg.Manifest = []byte(`name: greet
releases:
- name: greeter
  version: latest
stemcells:
- alias: default
  os: ` + fixtures.StemcellOS + `
  version: "` + fixtures.StemcellVersion + `"
instance_groups:
- name: hello
  instances: 1
  azs: [z1]
  jobs:
  - name: hello
    release: greeter
`)
	res, err := releaseimage.Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 || res[0].Release != "greeter" || res[0].Version != "1" {
		t.Fatalf("results %+v, want greeter version 1 only (toolbox is not in the manifest)", res)
	}
	if n := engine.calls.Load(); n != 2 {
		t.Errorf("compiled %d packages, want 2 (tools, greeter)", n)
	}
	img := pull(t, res[0].Ref())
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if got := cf.Config.Labels[names.ImageLabelSkippedPackages]; got != "extra" {
		t.Errorf("label %s = %q, want extra", names.ImageLabelSkippedPackages, got)
	}
	files := imageFiles(t, img)
	for _, f := range []string{"var/vcap/packages/greeter/greet.sh", "var/vcap/packages/tools/tool.sh", "var/vcap/jobs-src/hello/job.MF", "var/vcap/jobs-src/unused/job.MF"} {
		if _, ok := files[f]; !ok {
			t.Errorf("the image has no /%s", f)
		}
	}
	if _, ok := files["var/vcap/packages/extra/extra/top.txt"]; ok {
		t.Error("the image has package extra, which no job of the manifest needs")
	}
	out, err := exec.Command("podman", "run", "--rm", "--tls-verify=false", "--network=none", res[0].Ref(), "/var/vcap/packages/greeter/greet.sh").Output()
	if err != nil || strings.TrimSpace(string(out)) != "hello from a blob and world" {
		t.Errorf("greet.sh in the image: %v: %q", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("podman", "rmi", "-f", res[0].Ref()).Run() })
}
