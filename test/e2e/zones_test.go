package e2e_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bosh-injector/bosh-injector/cmd/bosh-injector/app"
	"github.com/bosh-injector/bosh-injector/gather/gathering/objects"
	"github.com/bosh-injector/bosh-injector/gather/names"
	"github.com/bosh-injector/bosh-injector/gather/operator/status"
	"github.com/bosh-injector/bosh-injector/test/controlplane"
	"github.com/bosh-injector/bosh-injector/test/fixtures"
	"github.com/bosh-injector/bosh-injector/test/walkthrough"
)

// The zones test's deployment, namespace and group; the lifecycled job's
// process container and where its scripts (drain among them) write.
const (
	zonesNS        = "zones"
	zonesGroup     = "lc"
	zonesContainer = "lifecycled-lifecycled"
	lifecycleLog   = "/var/vcap/sys/log/lifecycled/lifecycle.log"
)

// zonesManifest is a group of the lifecycle fixture job (pre-stop, a dynamic
// drain, post-stop) over two AZs, updated one instance at a time.
func zonesManifest(releaseURL string, instances int) []byte {
	return fmt.Appendf(nil, `name: zones
releases:
- {name: lifecycle, version: %q, url: %s}
stemcells:
- {alias: default, os: %s, version: %q}
update: {canaries: 1, max_in_flight: 1, canary_watch_time: 1000-60000, update_watch_time: 1000-60000}
instance_groups:
- name: %s
  azs: [z1, z2]
  instances: %d
  networks: [{name: default}]
  jobs:
  - {name: lifecycled, release: lifecycle}
`, fixtures.Version, releaseURL, fixtures.StemcellOS, fixtures.StemcellVersion, zonesGroup, instances)
}

// directorAZ is the AZ a director places index i of a fresh group in over
// z1 and z2: the AZ with fewer instances, the lesser name on a tie.
func directorAZ(i int) string { return []string{"z1", "z2"}[i%2] }

// TestZones runs a deployment of two AZs on three real nodes in two zones
// (z1 on two, z2 on one), with the objects `bosh-injector objects` prints:
// each AZ in its zone and spread over its nodes, scaled as a director
// scales, a node drained as a director's maintenance (at most
// max_in_flight instances stopped, each running its drain), a lost node
// recovered with cck. It drains and loses a node for good, so it has a
// cluster of its own.
func TestZones(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// Its cluster stops as it ends (after start's cleanup, which reads
	// the cluster's logs on a failure): idle, three nodes would take the
	// CPU of the tests still running.
	t.Cleanup(func() {
		if err := zonesCluster.stop(); err != nil {
			t.Errorf("stopping the zones cluster: %v", err)
		}
	})
	w, releaseURL, said := zonesCluster.start(t)
	began := time.Now()
	cs, err := kubernetes.NewForConfig(w.Cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	first, z1, z2 := w.Cluster.Nodes[0].Name, w.Cluster.Nodes[1].Name, w.Cluster.Nodes[2].Name
	for line := range strings.Lines(said.String()) {
		if strings.Contains(line, "Ready (kubelet") {
			t.Log(strings.TrimSpace(line))
		}
	}
	watchCtx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	tr := track(watchCtx, cs, zonesNS, names.LabelDeployment+"=zones,"+names.LabelInstanceGroup+"="+zonesGroup)

	kubectl := func(t *testing.T, args ...string) string {
		t.Helper()
		out, err := w.Kubectl(ctx, args...)
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	// deploy gathers the manifest of n instances and applies the objects
	// `objects` prints for it, as `kubectl apply` would, then waits for
	// every instance Ready with the index and AZ the director gives it,
	// never more than max_in_flight (1) of those kept unavailable at once.
	kept := 0
	deploy := func(t *testing.T, n int) map[string]*corev1.Pod {
		t.Helper()
		tr.expect(min(kept, n))
		defer func() {
			kept = n
			if worst, seen := tr.worstUnavailable(); worst > 1 {
				t.Errorf("%d instances unavailable at once, max_in_flight is 1:\n%s", worst, seen)
			}
		}()
		m := zonesManifest(releaseURL, n)
		gst, err := w.Deploy(ctx, zonesNS, func(ctx context.Context, c client.Client, ns string) (*corev1.Secret, error) {
			return fixtures.Apply(ctx, c, ns, "zones", "zones-manifest", m)
		})
		if err != nil || gst.State != status.ReasonGathered {
			t.Fatalf("gathering: %v, %+v", err, gst)
		}
		res, err := objects.Build(m, nil, objects.Options{Namespace: zonesNS})
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range res.Objects[1:] {
			if err := applyObject(ctx, w.Client, o); err != nil {
				t.Fatal(err)
			}
		}
		placed := func(pods map[string]*corev1.Pod) bool {
			indexes := map[int]string{}
			for _, p := range pods {
				if !podReady(p) {
					return false
				}
				i, err := strconv.Atoi(p.Labels[names.LabelInstanceIndex])
				if err != nil {
					return false
				}
				indexes[i] = p.Labels[names.LabelAZ]
			}
			for i := range n {
				if indexes[i] != directorAZ(i) {
					return false
				}
			}
			return len(indexes) == n
		}
		tr.waitFor(t, 4*time.Minute, fmt.Sprintf("%d instances Ready", n), placed)
		// The deploy of the new manifest may update instances after:
		// the next step starts when it is done.
		deadline := time.Now().Add(3 * time.Minute)
		for {
			var s corev1.Secret
			if err := w.Client.Get(ctx, client.ObjectKey{Namespace: zonesNS, Name: "zones-manifest"}, &s); err != nil {
				t.Fatal(err)
			}
			if st, current := status.CurrentDeploy(&s); current && st.Phase == status.PhaseDeployed {
				break
			} else if time.Now().After(deadline) {
				t.Fatalf("deploy not done after 3m: %+v", st)
			}
			time.Sleep(200 * time.Millisecond)
		}
		return tr.waitFor(t, 2*time.Minute, fmt.Sprintf("%d instances Ready after the deploy", n), placed)
	}
	nodeOf := func(pods map[string]*corev1.Pod) map[string]string {
		out := map[string]string{}
		for name, p := range pods {
			out[name] = p.Spec.NodeName
		}
		return out
	}
	step := func(name string, f func(t *testing.T)) { timedStep(t, name, f) }

	step("each AZ's instances in its zone, z1's on different nodes", func(t *testing.T) {
		pods := deploy(t, 4)
		where := nodeOf(pods)
		want := map[string]string{"zones-lc-z2-0": z2, "zones-lc-z2-1": z2}
		if got := map[string]string{"zones-lc-z2-0": where["zones-lc-z2-0"], "zones-lc-z2-1": where["zones-lc-z2-1"]}; !maps.Equal(got, want) {
			t.Errorf("z2's instances on %v, want the z2 node %s", got, z2)
		}
		if got := []string{where["zones-lc-z1-0"], where["zones-lc-z1-1"]}; !slices.Contains(got, first) || !slices.Contains(got, z1) {
			t.Errorf("z1's instances on %v, want one on each z1 node (%s, %s)", got, first, z1)
		}
		// The cluster has no zone z3: objects says so when it can look.
		code, stderr := objectsWithKubeconfig(t, w.Kubeconfig, bytes.ReplaceAll(zonesManifest(releaseURL, 4), []byte("[z1, z2]"), []byte("[z1, z3]")))
		if code != 0 || !strings.Contains(stderr, "AZ 'z3': no node of the cluster is in zone 'z3'") {
			t.Errorf("objects --kubeconfig: exit %d, stderr %q", code, stderr)
		}
	})

	step("scaled 4 to 6: the next indexes in the director's AZs", func(t *testing.T) {
		// The first node cordoned meanwhile: z1's new instance joins
		// the other z1 node, which then holds two for the drain.
		kubectl(t, "cordon", first)
		pods := deploy(t, 6)
		kubectl(t, "uncordon", first)
		if where := nodeOf(pods); where["zones-lc-z1-2"] != z1 {
			t.Fatalf("zones-lc-z1-2 on %s, want %s", where["zones-lc-z1-2"], z1)
		}
	})

	step("kubectl drain of a z1 node: one instance at a time, each drained, back on the other z1 node", func(t *testing.T) {
		before := tr.waitFor(t, time.Second, "pods", func(map[string]*corev1.Pod) bool { return true })
		var evicted []string
		for name, p := range before {
			if p.Spec.NodeName == z1 {
				evicted = append(evicted, name)
			}
		}
		slices.Sort(evicted)
		// Two at least (a deploy's update may have moved more there):
		// the budget lets one go at a time.
		if len(evicted) < 2 {
			t.Fatalf("%s holds %v, want two instances or more", z1, evicted)
		}
		logs := drainLogs(t, w, evicted)
		tr.expect(6)
		start := time.Now()
		kubectl(t, "drain", z1, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=4m")
		pods := tr.waitFor(t, 2*time.Minute, "6 instances Ready", func(pods map[string]*corev1.Pod) bool {
			n := 0
			for _, p := range pods {
				if podReady(p) {
					n++
				}
			}
			return n == 6
		})
		t.Logf("drained in %s", time.Since(start).Round(100*time.Millisecond))
		kubectl(t, "uncordon", z1)
		if worst, seen := tr.worstUnavailable(); worst > 1 {
			t.Errorf("%d instances unavailable at once, max_in_flight is 1:\n%s", worst, seen)
		}
		for _, name := range evicted {
			p := pods[name]
			if p.Spec.NodeName != first || p.Labels[names.LabelInstanceIndex] != before[name].Labels[names.LabelInstanceIndex] || p.UID == before[name].UID {
				t.Errorf("%s: on %s with index %s, want a new pod on %s with index %s", name, p.Spec.NodeName, p.Labels[names.LabelInstanceIndex], first, before[name].Labels[names.LabelInstanceIndex])
			}
			if l := <-logs[name]; !strings.Contains(l, "drain job_shutdown hash_unchanged") {
				t.Errorf("%s's lifecycle log while it stopped lacks its drain:\n%s", name, l)
			}
		}
	})

	step("scaled 6 to 3: the highest indexes go one at a time (max_in_flight), each drained", func(t *testing.T) {
		removed := []string{"zones-lc-z1-2", "zones-lc-z2-1", "zones-lc-z2-2"}
		logs := drainLogs(t, w, removed)
		tr.expectRemoved(removed)
		pods := deploy(t, 3)
		if most := tr.mostRemovedAtOnce(); most != 1 {
			t.Errorf("%d removed instances terminating at once, max_in_flight is 1", most)
		}
		if got := slices.Sorted(maps.Keys(pods)); !slices.Equal(got, []string{"zones-lc-z1-0", "zones-lc-z1-1", "zones-lc-z2-0"}) {
			t.Errorf("left %v", got)
		}
		for _, name := range removed {
			if l := <-logs[name]; !strings.Contains(l, "drain job_shutdown hash_unchanged") {
				t.Errorf("%s's lifecycle log while it stopped lacks its drain:\n%s", name, l)
			}
		}
	})

	step("a lost node: cck recreates its instance on the other z1 node", func(t *testing.T) {
		// An instance on the z1 node to lose: the scale-down's update
		// may have put one there, else one is moved there.
		lost := ""
		for name, p := range tr.waitFor(t, time.Second, "pods", func(map[string]*corev1.Pod) bool { return true }) {
			if p.Spec.NodeName == z1 && podReady(p) {
				lost = name
			}
		}
		if lost == "" {
			kubectl(t, "cordon", first)
			lost = "zones-lc-z1-1"
			kubectl(t, "delete", "pod", "-n", zonesNS, lost)
			tr.waitFor(t, 2*time.Minute, lost+" Ready on "+z1, func(pods map[string]*corev1.Pod) bool {
				p := pods[lost]
				return p != nil && podReady(p) && p.Spec.NodeName == z1
			})
			kubectl(t, "uncordon", first)
		}
		before := tr.waitFor(t, time.Second, "pods", func(map[string]*corev1.Pod) bool { return true })[lost]
		t.Logf("losing %s with %s", z1, lost)

		start := time.Now()
		if err := w.Cluster.KillNode(z1); err != nil {
			t.Fatal(err)
		}
		// The node controller notices the lease is not renewed and
		// marks the instance not Ready, with an Event naming the node.
		tr.waitFor(t, 2*time.Minute, lost+" not Ready", func(pods map[string]*corev1.Pod) bool {
			p := pods[lost]
			return p != nil && !podReady(p)
		})
		t.Logf("%s not Ready %s after its node was lost", lost, time.Since(start).Round(100*time.Millisecond))
		events, err := cs.CoreV1().Events(zonesNS).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + lost + ",reason=NodeNotReady"})
		if err != nil || len(events.Items) == 0 {
			t.Errorf("no NodeNotReady Event for %s: %v", lost, err)
		}
		// The documented recovery, as `bosh cck`: the lost instances
		// listed, then recreated elsewhere.
		for _, args := range [][]string{nil, {"--recreate"}} {
			var out bytes.Buffer
			code := app.Main(append([]string{"cck", "zones", "-n", zonesNS, "--kubeconfig", w.Kubeconfig}, args...), &out, &out)
			t.Logf("cck %v: exit %d\n%s", args, code, out.String())
			if code != 0 || !strings.Contains(out.String(), "lc/"+before.Labels[names.LabelInstanceIndex]+" (pod "+lost+") on node "+z1+": its node is not Ready") {
				t.Fatalf("cck %v did not name %s", args, lost)
			}
		}
		pods := tr.waitFor(t, 3*time.Minute, lost+" Ready on "+first, func(pods map[string]*corev1.Pod) bool {
			p := pods[lost]
			return p != nil && podReady(p) && p.Spec.NodeName == first && p.UID != before.UID
		})
		t.Logf("%s Ready on %s %s after its node was lost", lost, first, time.Since(start).Round(100*time.Millisecond))
		if pods[lost].Labels[names.LabelInstanceIndex] != before.Labels[names.LabelInstanceIndex] {
			t.Errorf("index %s, was %s", pods[lost].Labels[names.LabelInstanceIndex], before.Labels[names.LabelInstanceIndex])
		}
	})
	t.Logf("all in %s", time.Since(began).Round(time.Second))
}

// applyObject creates an object or, where it exists, sets what a new `objects`
// output changes of it (a StatefulSet's replicas), as kubectl apply does.
func applyObject(ctx context.Context, c client.Client, o client.Object) error {
	err := c.Create(ctx, o)
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	want, ok := o.(*appsv1.StatefulSet)
	if !ok {
		return nil
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var sts appsv1.StatefulSet
		if err := c.Get(ctx, client.ObjectKeyFromObject(want), &sts); err != nil {
			return err
		}
		sts.Spec.Replicas = want.Spec.Replicas
		return c.Update(ctx, &sts)
	})
}

// drainLogs follows, for each pod named, its lifecycle log from now until
// its container stops (`tail -F` in an exec its container's end closes), so
// what its drain writes while it stops is read however late the pod's
// deletion is seen; each channel gets all it read. It returns once every
// log is followed.
func drainLogs(t *testing.T, w *walkthrough.Walkthrough, pods []string) map[string]chan string {
	t.Helper()
	bin, err := controlplane.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	out := map[string]chan string{}
	for _, name := range pods {
		cmd := exec.CommandContext(ctx, filepath.Join(bin, "kubectl"), "exec", "-n", zonesNS, name, "-c", zonesContainer, "--",
			"tail", "-n", "+1", "-F", lifecycleLog)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+w.Kubeconfig)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		following, ended, ch := make(chan struct{}), make(chan struct{}), make(chan string, 1)
		out[name] = ch
		go func() {
			defer close(ended)
			var all strings.Builder
			lines := bufio.NewScanner(stdout)
			for first := true; lines.Scan(); first = false {
				if first {
					close(following)
				}
				all.WriteString(lines.Text() + "\n")
			}
			_ = cmd.Wait()
			ch <- all.String()
		}()
		// The log has post-start's line already.
		select {
		case <-following:
		case <-ended:
			t.Fatalf("following %s's lifecycle log: %s ended at once", name, strings.Join(cmd.Args, " "))
		case <-time.After(time.Minute):
			t.Fatalf("following %s's lifecycle log: nothing in a minute", name)
		}
	}
	return out
}

// objectsWithKubeconfig runs `bosh-injector objects --kubeconfig` on a
// manifest and returns its exit code and stderr.
func objectsWithKubeconfig(t *testing.T, kubeconfig string, m []byte) (int, string) {
	path := filepath.Join(t.TempDir(), "manifest.yml")
	if err := os.WriteFile(path, m, 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := app.Main([]string{"objects", "--manifest", path, "--kubeconfig", kubeconfig}, &stdout, &stderr)
	return code, stderr.String()
}
