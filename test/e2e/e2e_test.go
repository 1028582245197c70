// Package e2e_test runs bosh-injector end to end with real containers: the
// walkthrough of `make demo` on a local cluster of three real nodes in two
// zones (kubelet, containerd, kube-proxy each; cluster DNS; cert-manager;
// the chart installed with helm, its operator and CoreDNS as pods), with
// the gathering Job's pod and the injected pods run by the kubelet, and
// checks what each step produced.
package e2e_test

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bosh-injector/bosh-injector/gather/operator/status"
	"github.com/bosh-injector/bosh-injector/gather/render/rendering"
	"github.com/bosh-injector/bosh-injector/gather/render/ruby"
	"github.com/bosh-injector/bosh-injector/inject"
	"github.com/bosh-injector/bosh-injector/inject/runtime/contract"
	"github.com/bosh-injector/bosh-injector/test/fixtures"
	"github.com/bosh-injector/bosh-injector/test/walkthrough"
)

// The package's tests share one walkthrough: a cluster with the chart
// installed and every fixture release's image in its registry, each test
// in namespaces of its own, so they run in parallel (most of their time is
// spent waiting for pods and watch times). TestZones, which drains and
// loses a node, has a cluster of its own and runs alongside them.
var (
	shared = &clusterOnce{prefix: "bosh-injector-e2e-",
		releases: append(slices.Clone(fixtures.Releases), "echo", "dns", "cfslice")}
	zonesCluster = &clusterOnce{prefix: "bosh-injector-e2e-zones-", releases: []string{"lifecycle"}}
)

// clusterOnce is a walkthrough on a local cluster of three real nodes
// (zones z1, z1, z2; its own pods on the first), started by the first test
// that asks, with fixture releases built into images in its registry.
type clusterOnce struct {
	prefix   string // of its files' directory
	releases []string

	once       sync.Once
	dir        string
	w          *walkthrough.Walkthrough
	releaseURL string
	said       fixtures.SyncBuffer
	err        error
}

func TestMain(m *testing.M) {
	// The tests wait far more than they compute: all run at once unless
	// -parallel says otherwise (ginkgo suites refuse a -parallel for the
	// whole of `go test ./...`, so it is set here).
	flag.Parse()
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	if !explicit {
		_ = flag.Set("test.parallel", "16")
	}
	// The clusters (three nodes each) start from a TMPDIR far longer than
	// /tmp, as a user's may be: their sockets live at short paths of
	// their own (issue 47).
	long, err := longTempDir()
	if err != nil {
		fmt.Fprintln(os.Stderr, "a long TMPDIR:", err)
		os.Exit(1)
	}
	os.Setenv("TMPDIR", long)
	code := m.Run()
	for _, c := range []*clusterOnce{shared, zonesCluster} {
		if err := c.stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the walkthrough:", err)
			code = 1
		}
	}
	// After the clusters, which write there until they stop.
	_ = os.RemoveAll(filepath.Dir(long))
	os.Exit(code)
}

// startWalkthrough returns the package's shared walkthrough, its fixture
// images under releaseURL; said is its narration.
func startWalkthrough(tb testing.TB) (w *walkthrough.Walkthrough, releaseURL string, said *fixtures.SyncBuffer) {
	return shared.start(tb)
}

// start starts the walkthrough once. A test that fails gets the cluster's
// and the operator's logs and the narration so far.
func (c *clusterOnce) start(tb testing.TB) (*walkthrough.Walkthrough, string, *fixtures.SyncBuffer) {
	ctx := context.Background()
	c.once.Do(func() {
		if c.dir, c.err = os.MkdirTemp("", c.prefix); c.err != nil {
			return
		}
		c.w, c.err = walkthrough.Start(ctx, walkthrough.Options{Out: &c.said, Dir: c.dir,
			Nodes: 3, Zones: []string{"z1", "z1", "z2"}})
		if c.err != nil {
			return
		}
		// The release images are pushed to the cluster's registry, which
		// its nodes pull them from.
		c.releaseURL = c.w.Registry() + "/bosh-injector-fixtures"
		c.err = fixtures.BuildImages(ctx, walkthrough.BaseImage, c.releaseURL, c.releases...)
	})
	tb.Cleanup(func() {
		if tb.Failed() {
			tb.Logf("narration:\n%s", c.said.String())
			if c.w != nil && c.w.Cluster != nil {
				c.w.Cluster.Logs(os.Stderr, 40)
				tb.Logf("operator logs:\n%s", c.w.OperatorLogs(ctx))
				// A pod that never started has no logs: where it is and
				// what the scheduler and kubelet said of it.
				pods, _ := c.w.Kubectl(ctx, "get", "pods", "-A", "-o", "wide")
				warnings, _ := c.w.Kubectl(ctx, "get", "events", "-A", "--field-selector", "type=Warning", "--sort-by", ".lastTimestamp")
				tb.Logf("pods:\n%s\nwarning events:\n%s", pods, warnings)
			}
		}
	})
	if c.err != nil {
		tb.Fatal(c.err)
	}
	return c.w, c.releaseURL, &c.said
}

// stop stops a started walkthrough and removes its files; stopped, it
// does nothing.
func (c *clusterOnce) stop() error {
	var err error
	if c.w != nil {
		err = c.w.Stop()
		c.w = nil
	}
	if c.dir != "" {
		_ = os.RemoveAll(c.dir)
		c.dir = ""
	}
	return err
}

func TestWalkthrough(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w, releaseURL, said := startWalkthrough(t)
	t.Cleanup(func() {
		if t.Failed() || testing.Verbose() {
			t.Logf("narration:\n%s", said.String())
		}
	})

	t.Run("the gathered deployment's instance runs its rendered configuration", func(t *testing.T) {
		const ns = "shop"
		gst, err := w.Deploy(ctx, ns, fixtures.Shop(releaseURL))
		if err != nil {
			t.Fatal(err)
		}
		if gst.State != status.ReasonGathered {
			t.Fatalf("gathering: %+v", gst)
		}
		// The gathering ran with its own ServiceAccount's token, which the
		// release templates could not read.
		if !strings.Contains(said.String(), ruby.Confined) {
			t.Errorf("the gathering did not say %q", ruby.Confined)
		}
		for _, name := range []string{"shop.ig-resolved.web-v1", "shop.bpm.web-v1", "shop.ig-resolved.bus-v1"} {
			if err := w.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &corev1.Secret{}); err != nil {
				t.Errorf("the gathering pod did not write Secret %s: %v", name, err)
			}
		}
		// The embedded config server generated the certificate, as a
		// director's CredHub does.
		if tls, err := w.Credential(ctx, "/bosh-injector/shop/bus_tls"); err != nil || !strings.Contains(tls, "BEGIN CERTIFICATE") {
			t.Errorf("the config server's /bosh-injector/shop/bus_tls: %v", err)
		}

		run, err := w.StartInstance(ctx, ns, walkthrough.Instance{Group: "web", AZIndex: 1, Container: "storefront-storefront", Image: fixtures.Image(releaseURL, "shop")})
		if err != nil {
			t.Fatal(err)
		}
		logs, err := run.WaitForLog(ctx, "storefront-storefront", "listen_port:", 2*time.Minute)
		results, rerr := w.Report(ctx, run)
		if err != nil || rerr != nil {
			t.Fatalf("%v %v\n%s\ncontainers: %+v", err, rerr, logs, results)
		}
		// Its own address resolves to its IP before its processes start,
		// as on a VM: render waits for it and logs it.
		if said, err := run.WaitForLog(ctx, inject.RenderContainer, rendering.AddressResolved, 30*time.Second); err != nil {
			t.Errorf("render did not say %q: %v\n%s", rendering.AddressResolved, err, said)
		}
		for _, want := range []string{
			"==> /var/vcap/jobs/storefront/config/storefront.yml <==",
			"listen_port: 8080",
			"host: shop-db-0.shop.svc.cluster.local",
			"- nats://shop-bus-2.shop.svc.cluster.local:4222",
		} {
			if !strings.Contains(logs, want) {
				t.Errorf("the process's output lacks %q:\n%s", want, logs)
			}
		}
		// What the demo prints names the Secrets instead of their values.
		redacted, err := w.Redact(ctx, ns, logs)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(redacted, "password: (/bosh-injector/shop/db_password)") || !strings.Contains(redacted, "session_secret: (/bosh-injector/shop/session_secret)") {
			t.Errorf("credentials not redacted:\n%s", redacted)
		}
		// The credhub CLI's way, with curl: what the processes were given.
		fetched, err := w.FetchCredential(ctx, "/bosh-injector/shop/db_password")
		if err != nil {
			t.Fatal(err)
		}
		if value, _ := fetched["value"].(string); value == "" || !strings.Contains(logs, "password: "+value) {
			t.Errorf("the config server's db_password is not what storefront rendered")
		}
		var pod corev1.Pod
		if err := w.Client.Get(ctx, run.Key(), &pod); err != nil {
			t.Fatal(err)
		}
		if pod.Status.Phase != corev1.PodRunning {
			t.Errorf("reported phase %s, want Running", pod.Status.Phase)
		}

		// The db group's job keeps its data on the persistent disk: the
		// StatefulSet's claim, mounted at /var/vcap/store/pgstore.
		// Its release's jobs are copied, as the annotation asks, where the
		// web instance's are mounted as an image volume, as the operator
		// found the node can.
		db, err := w.StartInstance(ctx, ns, walkthrough.Instance{Group: "db", AZIndex: 1, Container: "pgstore-pgstore",
			Image: fixtures.Image(releaseURL, "store"), Disk: "1Gi", ReleaseJobs: inject.ReleaseJobsCopy})
		if err != nil {
			t.Fatal(err)
		}
		dbLogs, err := db.WaitForLog(ctx, "pgstore-pgstore", "/var/vcap/store/pgstore:", 2*time.Minute)
		if _, rerr := w.Report(ctx, db); err != nil || rerr != nil {
			t.Fatalf("%v %v\n%s", err, rerr, dbLogs)
		}
		// Its pre-start ran beside the process container, whose launcher
		// started the process only after it ended.
		preStart, started := logTimes(t, w, db.Key(), contract.PreStart, ""), logTimes(t, w, db.Key(), "pgstore-pgstore", `"msg":"started"`)
		if len(preStart) == 0 || len(started) == 0 || !started[0].After(preStart[len(preStart)-1]) {
			t.Errorf("pgstore started at %v, its pre-start wrote at %v", started, preStart)
		}
		for _, want := range []string{"port: 5432", "- name: shop\n  owner: storefront", "==> /var/vcap/store/pgstore: writable <=="} {
			if !strings.Contains(dbLogs, want) {
				t.Errorf("the db process's output lacks %q:\n%s", want, dbLogs)
			}
		}
		for key, copies := range map[client.ObjectKey]bool{run.Key(): false, db.Key(): true} {
			var pod corev1.Pod
			if err := w.Client.Get(ctx, key, &pod); err != nil {
				t.Fatal(err)
			}
			copied := slices.ContainsFunc(pod.Spec.InitContainers, func(c corev1.Container) bool { return strings.HasPrefix(c.Name, "copy-") })
			mounted := slices.ContainsFunc(pod.Spec.Volumes, func(v corev1.Volume) bool { return v.Image != nil })
			if copied != copies || mounted == copies {
				t.Errorf("pod %s: copy init containers %v, image volumes %v; want copies %v", key.Name, copied, mounted, copies)
			}
		}

		if err := w.Events(ctx, ns); err != nil {
			t.Fatal(err)
		}
		var events corev1.EventList
		if err := w.Client.List(ctx, &events, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		reasons := map[string]bool{}
		for _, e := range events.Items {
			reasons[e.Reason] = true
		}
		for _, want := range []string{status.ReasonGatherStarted, status.ReasonGathered} {
			if !reasons[want] {
				t.Errorf("no %s event in %v", want, reasons)
			}
		}
	})

	t.Run("a template that cannot render fails the gathering with template, line and property, and the last good version stays", func(t *testing.T) {
		const ns = "shop"
		before, err := w.Status(ctx, ns, fixtures.ManifestSecret)
		if err != nil {
			t.Fatal(err)
		}
		gst, err := w.Deploy(ctx, ns, fixtures.Shop(releaseURL, "missing-bus-password.yml"))
		if err != nil {
			t.Fatal(err)
		}
		// Like the director, gathering renders every template of every
		// instance before any instance changes.
		want := `Error filling in template 'bus.conf.erb' (line 10: Can't find property '["bus.password"]')`
		if gst.State != status.ReasonGatherFailed || !strings.Contains(gst.Message, want) {
			t.Fatalf("gathering: %+v, want %s with\n%s", gst, status.ReasonGatherFailed, want)
		}
		if !maps.Equal(gst.Versions, before.Versions) {
			t.Errorf("versions after a failed gathering: %v, before: %v", gst.Versions, before.Versions)
		}
	})
}

// logTimes are the times the kubelet gives the lines of a container's log
// that contain text.
func logTimes(t *testing.T, w *walkthrough.Walkthrough, pod client.ObjectKey, container, text string) []time.Time {
	t.Helper()
	data, err := w.Cluster.Clientset.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{Container: container, Timestamps: true}).DoRaw(context.Background())
	if err != nil {
		t.Fatalf("logs of %s: %v", container, err)
	}
	var times []time.Time
	for line := range strings.Lines(string(data)) {
		stamp, rest, _ := strings.Cut(line, " ")
		if at, err := time.Parse(time.RFC3339Nano, stamp); err == nil && strings.Contains(rest, text) {
			times = append(times, at)
		}
	}
	return times
}

// longTempDir makes a directory of 150 bytes' path under TMPDIR.
func longTempDir() (string, error) {
	base, err := os.MkdirTemp("", "bosh-injector-e2e-tmpdir-")
	if err != nil {
		return "", err
	}
	long := filepath.Join(base, "long"+strings.Repeat("-", max(150-len(base)-len("/long"), 0)))
	return long, os.Mkdir(long, 0o755)
}
