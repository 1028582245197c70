package sandbox

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/bosh-injector/bosh-injector/test/controlplane"
	"github.com/bosh-injector/bosh-injector/test/fixtures"
	"github.com/bosh-injector/bosh-injector/test/podman"
	"github.com/bosh-injector/bosh-injector/test/walkthrough"
)

// `make demo MANIFEST=… RELEASES=… OPS=… KEEP=1`, then `make demo-down`, as
// the Makefile runs them: the shop deployment from its release tarballs
// only, with an ops file that breaks the bus group's template. The report
// shows the db and web instances running their processes and where they
// listen, the bus instances with the director's message; real kubectl
// works with the printed KUBECONFIG; demo-down leaves no podman pod,
// container or volume of the run, no process and no directory.
func TestSandbox(t *testing.T) {
	bin, err := controlplane.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	fixtures.PodmanEnv()
	dir := t.TempDir()
	binary, err := walkthrough.BuildBinary(dir)
	if err != nil {
		t.Fatal(err)
	}
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	demo := filepath.Join(dir, "demo")
	build := exec.Command("go", "build", "-o", demo, "./test/demo")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the demo: %v: %s", err, out)
	}
	deployments := filepath.Join(fixtures.Dir(), "deployments")
	state := filepath.Join(dir, "state")
	args := []string{"--binary", binary, "--manifest", filepath.Join(deployments, "shop.yml"),
		"--ops-file", filepath.Join(deployments, "ops", "missing-bus-password.yml"), "--keep", "--state-dir", state}
	// The shop release as the fixture has it, but its storefront process
	// listens on storefront.port, so the report has a port to show.
	shop := filepath.Join(dir, "shop-listening")
	if err := os.CopyFS(shop, os.DirFS(fixtures.ReleaseDir("shop"))); err != nil {
		t.Fatal(err)
	}
	bpm := filepath.Join(shop, "jobs", "storefront", "templates", "bpm.yml.erb")
	data, err := os.ReadFile(bpm)
	if err != nil {
		t.Fatal(err)
	}
	data = []byte(strings.Replace(string(data), "  env:\n", "  env:\n    PRINTCONFIG_LISTEN: \":<%= p(\"storefront.port\") %>\"\n", 1))
	if err := os.WriteFile(bpm, data, 0o644); err != nil {
		t.Fatal(err)
	}
	tarballs := []func() (string, error){
		func() (string, error) { return fixtures.SourceTarball(dir, "bus") },
		func() (string, error) { return fixtures.SourceTarball(dir, "store") },
		func() (string, error) { return fixtures.SourceTarballFrom(dir, "shop", shop) },
	}
	for _, write := range tarballs {
		tarball, err := write()
		if err != nil {
			t.Fatal(err)
		}
		args = append(args, "--release", tarball)
	}

	up, err := exec.Command(demo, args...).CombinedOutput()
	st, stateErr := readState(state)
	t.Cleanup(func() {
		if stateErr == nil {
			_ = Down(os.Stderr, state)
		}
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, up)
	}
	if stateErr != nil {
		t.Fatalf("no state after the sandbox came up: %v\n%s", stateErr, up)
	}
	report := string(up)
	t.Logf("make demo … KEEP=1:\n%s", report)
	for _, want := range []string{
		"db/0 (z1) pod shop-db-z1-0: injected; rendered; running: pgstore-pgstore",
		"web/0 (z1) pod shop-web-z1-0: injected; rendered; running: storefront-storefront",
		"web/1 (z2) pod shop-web-z2-0: injected; rendered; running: storefront-storefront",
		"bus/0 (z1) pod shop-bus-z1-0: injected; not rendered",
		"bus/1 (z2) pod shop-bus-z2-0: injected; not rendered",
		"FAILED: init container render exited 1:",
		"- Unable to render jobs for instance group 'bus'. Errors are:",
		"Error filling in template 'bus.conf.erb' (line 10: Can't find property '[\"bus.password\"]')",
		"export KUBECONFIG=" + st.Kubeconfig,
		"make demo-down",
	} {
		if !strings.Contains(report, want) {
			t.Errorf("the sandbox's output lacks %q:\n%s", want, report)
		}
	}
	// Until pods get a network of their own, they have none: the port is
	// found all the same.
	if !regexp.MustCompile(`storefront-storefront listens on (\S+:)?8080\b`).MatchString(report) {
		t.Errorf("the report gives no port of storefront:\n%s", report)
	}

	kubectl := exec.Command(filepath.Join(bin, "kubectl"), "get", "pod", "shop-web-z1-0", "--namespace", "shop", "-o", "jsonpath={.status.phase}")
	kubectl.Env = append(os.Environ(), "KUBECONFIG="+st.Kubeconfig)
	if out, err := kubectl.CombinedOutput(); err != nil || string(out) != "Running" {
		t.Errorf("kubectl against the kept sandbox: %v: %s", err, out)
	}

	down, err := exec.Command(demo, "--down", "--state-dir", state).CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, down)
	}
	if alive(st) {
		t.Errorf("the sandbox's process %d still runs after demo-down", st.Pid)
	}
	for _, args := range [][]string{
		{"pod", "ls", "--format", "{{.Name}}"},
		{"ps", "--all", "--format", "{{.PodName}} {{.Names}}"},
		{"volume", "ls", "--format", "{{.Name}}"},
	} {
		out, err := podman.Command(context.Background(), args...).Output()
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(out), st.Prefix) {
			t.Errorf("podman %s after demo-down still lists the sandbox's:\n%s", strings.Join(args, " "), out)
		}
	}
	for _, d := range []string{state, st.Dir} {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("%s remains after demo-down (%v)", d, err)
		}
	}
}
