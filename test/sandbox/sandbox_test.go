package sandbox

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bosh-injector/bosh-injector/gather/configserver/store"
	"github.com/bosh-injector/bosh-injector/gather/gathering/objects"
	"github.com/bosh-injector/bosh-injector/gather/operator/status"

	"github.com/bosh-injector/bosh-injector/test/controlplane"
	"github.com/bosh-injector/bosh-injector/test/fixtures"
	"github.com/bosh-injector/bosh-injector/test/walkthrough"
)

// `make demo MANIFEST=… RELEASES=… OPS=… KEEP=1`, then `make demo-down`, as
// the Makefile runs them: the shop deployment from its release tarballs
// only. The report shows every instance running its processes and where
// they listen, reachable from this machine, then the smoke-tests errand run
// with run-errand and its output; real kubectl works with the
// printed KUBECONFIG and sees every instance's pod Ready; a manifest change
// that breaks a template then fails the gathering with the director's
// message while the pods keep running; demo-down leaves no process, cluster
// or directory of the run. A second sandbox with the broken manifest from
// the start reports every instance with the director's message, runs no
// errand and, without KEEP, removes its cluster when it ends.
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
	args := []string{"--binary", binary, "--manifest", filepath.Join(deployments, "shop.yml")}
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
	// Its process is not named after its job (as nats-release's nats-tls
	// runs nats-tls-wrapper): the pods `objects` describes run only the
	// process, not the template's placeholder container beside it.
	data = []byte(strings.Replace(string(data), "- name: storefront\n", "- name: web\n", 1))
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

	// The sandbox with the broken manifest from the start runs beside the
	// kept one, on a cluster of its own: most of either's time is waiting.
	brokenCtx, cancelBroken := context.WithCancel(context.Background())
	broken := exec.CommandContext(brokenCtx, demo, append(args, "--ops-file", filepath.Join(deployments, "ops", "missing-bus-password.yml"))...)
	// Stopped early (this test failed), it stops its cluster as on ^C.
	broken.Cancel = func() error { return broken.Process.Signal(syscall.SIGTERM) }
	broken.WaitDelay = time.Minute
	type result struct {
		out []byte
		err error
	}
	brokenDone := make(chan result, 1)
	go func() {
		out, err := broken.CombinedOutput()
		brokenDone <- result{out, err}
	}()
	t.Cleanup(func() {
		cancelBroken()
		<-brokenDone
	})

	// A variable given as bosh's -v gives: used as it is, never generated.
	up, err := exec.Command(demo, append(args, "--keep", "--state-dir", state, "--var", "session_secret="+givenSecret)...).CombinedOutput()
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
		"web/0 (z1) pod shop-web-z1-0: injected; rendered; running: storefront-web, web-check-errand\n",
		"web/1 (z2) pod shop-web-z2-0: injected; rendered; running: storefront-web, web-check-errand\n",
		"bus/0 (z1) pod shop-bus-z1-0: injected; rendered; running: bus-bus",
		"6 of 6 instances running",
		// The errand runs once the deployment is up, with run-errand.
		"Errand smoke-tests: `bosh-injector run-errand shop smoke-tests --namespace shop`",
		"==> /var/vcap/jobs/smoke-tests/config/config.json <==",
		"Errand 'smoke-tests' completed successfully",
		"exit status 0",
		"export KUBECONFIG=" + st.Kubeconfig,
		"make demo-down",
	} {
		if !strings.Contains(report, want) {
			t.Errorf("the sandbox's output lacks %q:\n%s", want, report)
		}
	}
	// Pods have addresses of their own, which this machine reaches.
	listens := regexp.MustCompile(`storefront-web listens on (\S+:8080)\b`).FindStringSubmatch(report)
	if listens == nil {
		t.Fatalf("the report gives no address of storefront's port:\n%s", report)
	}
	conn, err := net.DialTimeout("tcp", listens[1], 10*time.Second)
	if err != nil {
		t.Errorf("storefront at %s, as reported: %v", listens[1], err)
	} else {
		conn.Close()
	}

	// Every instance's pod is Ready, all of its containers with it.
	kubectl := exec.Command(filepath.Join(bin, "kubectl"), "get", "pods", "--namespace", "shop", "--selector", "controller-revision-hash",
		"-o", `jsonpath={range .items[*]}{.metadata.name} {.status.conditions[?(@.type=="Ready")].status} {.status.containerStatuses[*].name}{"\n"}{end}`)
	kubectl.Env = append(os.Environ(), "KUBECONFIG="+st.Kubeconfig)
	out, err := kubectl.CombinedOutput()
	if err != nil || strings.Count(string(out), " True ") != 6 || strings.Contains(string(out), "storefront-storefront") {
		t.Errorf("kubectl against the kept sandbox: %v: want 6 Ready pods, storefront's running only its process:\n%s", err, out)
	}

	givenVariableAndApplySafeSecret(t, bin, binary, st.Kubeconfig, filepath.Join(deployments, "shop.yml"))
	brokenGatheringKeepsThePods(t, st.Kubeconfig)

	down, err := exec.Command(demo, "--down", "--state-dir", state).CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, down)
	}
	if alive(st) {
		t.Errorf("the sandbox's process %d still runs after demo-down", st.Pid)
	}
	for _, d := range []string{state, st.Dir, st.ClusterDir} {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("%s remains after demo-down (%v)", d, err)
		}
	}

	// The broken manifest from the start: no instance can be injected, and
	// each says why with the director's message.
	r := <-brokenDone
	brokenDone <- r
	if out, err = r.out, r.err; err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	// Without KEEP the sandbox stops by itself, its cluster with it.
	if m := regexp.MustCompile(`files in (\S+)`).FindStringSubmatch(string(out)); m == nil {
		t.Errorf("the sandbox did not say where its cluster's files are:\n%s", out)
	} else if _, err := os.Stat(m[1]); !os.IsNotExist(err) {
		t.Errorf("the cluster's files %s remain after the sandbox stopped (%v)", m[1], err)
	}
	t.Logf("make demo … OPS=missing-bus-password.yml:\n%s", out)
	for _, want := range []string{
		"FAILED: not gathered: the deployment's gathering failed",
		"- Unable to render jobs for instance group 'bus'. Errors are:",
		busError,
		"0 of 6 instances running",
		"not run: the deployment is not up (0 of 6 instances running)",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the sandbox's output lacks %q:\n%s", want, out)
		}
	}
}

const givenSecret = "given-by-the-user-0123456789abcdef"

// givenVariableAndApplySafeSecret: the variable given with --var is its
// Secret, labelled as a user provides one; and the manifest Secret the
// sandbox created is one `kubectl apply` updates as it had applied it:
// objects printed without the sandbox's ops file, applied (server dry
// run), leave no stale ops key behind.
func givenVariableAndApplySafeSecret(t *testing.T, bin, binary, kubeconfig, manifest string) {
	kubectl := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(filepath.Join(bin, "kubectl"), args...)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %s: %v: %s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	// The embedded config server keeps it, as `credhub set` would.
	got := kubectl("get", "secret", "--namespace", walkthrough.Namespace, "-l", store.LabelID,
		"-o", `go-template={{range .items}}{{index .metadata.annotations "`+store.AnnotationName+`"}} {{index .data "`+store.KeyValue+`" | base64decode}}{{"\n"}}{{end}}`)
	if want := "/bosh-injector/shop/session_secret \"" + givenSecret + "\""; !strings.Contains(got, want) {
		t.Errorf("the config server's credentials:\n%s\nwant %s", got, want)
	}
	// The sandbox created it as kubectl apply does, its last-applied
	// configuration the objects it applied.
	last := kubectl("apply", "view-last-applied", "secret/"+fixtures.ManifestSecret, "--namespace", "shop", "-o", "yaml")
	for _, key := range []string{"manifest.yaml:", "ops-01-release-images.yaml:"} {
		if !strings.Contains(last, key) {
			t.Errorf("the manifest Secret's last-applied configuration lacks %s:\n%s", key, last)
		}
	}
	dir := t.TempDir()
	if out, err := exec.Command(binary, "objects", "--manifest", manifest, "--namespace", "shop", "--output", dir).CombinedOutput(); err != nil {
		t.Fatalf("objects: %v: %s", err, out)
	}
	secret := filepath.Join(dir, "secret-"+fixtures.ManifestSecret+".yaml")
	if data, _ := os.ReadFile(secret); strings.Contains(string(data), "\nstringData:") {
		// kubectl apply cannot prune keys of stringData (write-only):
		// this waits for objects to print the Secret's data.
		t.Logf("objects prints the manifest Secret's stringData: not checking that kubectl apply prunes its stale ops keys")
		return
	}
	keys := kubectl("apply", "--dry-run=server", "-f", secret, "-o", `go-template={{range $k, $v := .data}}{{$k}} {{end}}`)
	if keys != "manifest.yaml " {
		t.Errorf("kubectl apply of the manifest Secret without ops files leaves keys %q, want only manifest.yaml", keys)
	}
}

const busError = "Error filling in template 'bus.conf.erb' (line 10: Can't find property '[\"bus.password\"]')"

// brokenGatheringKeepsThePods adds an ops file breaking bus.conf.erb to the
// kept sandbox's manifest Secret, as a user would: its gathering fails with
// the director's message, and the pods keep running their last good version.
func brokenGatheringKeepsThePods(t *testing.T, kubeconfig string) {
	ctx := context.Background()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKey{Namespace: "shop", Name: fixtures.ManifestSecret}
	var secret corev1.Secret
	if err := c.Get(ctx, key, &secret); err != nil {
		t.Fatal(err)
	}
	before := status.GatheringOf(&secret)
	ops, err := os.ReadFile(filepath.Join(fixtures.Dir(), "deployments", "ops", "missing-bus-password.yml"))
	if err != nil {
		t.Fatal(err)
	}
	secret.Data[objects.OpsKey(len(secret.Data)-1, "missing-bus-password")] = ops
	if err := c.Update(ctx, &secret); err != nil {
		t.Fatal(err)
	}
	var gst status.Gathering
	if err := wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, key, &secret); err != nil {
			return false, err
		}
		gst = status.GatheringOf(&secret)
		return gst.Job != before.Job && gst.State == status.ReasonGatherFailed, nil
	}); err != nil {
		t.Fatalf("the broken manifest's gathering: %v, status %+v", err, gst)
	}
	if !strings.Contains(gst.Message, busError) {
		t.Errorf("the failed gathering's message lacks %q:\n%s", busError, gst.Message)
	}
	for _, name := range []string{"shop-bus-z1-0", "shop-web-z1-0"} {
		var pod corev1.Pod
		if err := c.Get(ctx, client.ObjectKey{Namespace: "shop", Name: name}, &pod); err != nil || pod.Status.Phase != corev1.PodRunning {
			t.Errorf("pod %s after the failed gathering: %v %s", name, err, pod.Status.Phase)
		}
	}
}
