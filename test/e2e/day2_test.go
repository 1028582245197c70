package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bosh-injector/bosh-injector/cmd/bosh-injector/app"
	"github.com/bosh-injector/bosh-injector/gather/gathering/objects"
	"github.com/bosh-injector/bosh-injector/gather/model/deployment"
	"github.com/bosh-injector/bosh-injector/gather/names"
	"github.com/bosh-injector/bosh-injector/gather/operator/status"
	"github.com/bosh-injector/bosh-injector/test/fixtures"
)

// TestDay2Commands runs the day-2 commands (the CLI's own code, in
// process, with the cluster's kubeconfig) on the day2 fixture deployment
// in a namespace of its own: short ssh -c execs, each output arriving;
// instances --ps against the pods and the failing post-start of broken;
// ssh -c as vcap; logs; variables; stop (drain in the log, the pod kept
// not Ready, still stopped after its container restarted and after its
// pod was replaced), start, restart (same pod, drain and post-start
// again) and recreate (a new pod, the disk's bytes kept) with the other
// instances' pods untouched; delete-deployment, after which only the
// orphaned claim and the generated variable are left (PodDisruptionBudgets
// gone too, one created without the deployment label as before).
func TestDay2Commands(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w, releaseURL, _ := startWalkthrough(t)
	const ns = "day2"
	began := time.Now()
	if gst, err := w.Deploy(ctx, ns, fixtures.Deployment("day2", releaseURL)); err != nil || gst.State != status.ReasonGathered {
		t.Fatalf("gathering: %+v %v", gst, err)
	}
	var manifest corev1.Secret
	if err := w.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "day2-manifest"}, &manifest); err != nil {
		t.Fatal(err)
	}
	res, err := objects.Build(manifest.Data[names.ManifestKey], deployment.OpsFilesOf(manifest.Data), objects.Options{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	unlabelled := false
	for _, o := range res.Objects {
		if b, ok := o.(*policyv1.PodDisruptionBudget); ok && !unlabelled {
			// As `objects` printed it before it labelled every object:
			// delete-deployment finds it by its selector.
			delete(b.Labels, names.LabelDeployment)
			unlabelled = true
		}
		if o.GetObjectKind().GroupVersionKind().Kind != "Secret" {
			if err := w.Client.Create(ctx, o); err != nil {
				t.Fatal(err)
			}
		}
	}
	cli := func(args ...string) (int, string) {
		t.Helper()
		var out bytes.Buffer
		start := time.Now()
		code := app.Main(append(args, "-d", "day2", "-n", ns, "--kubeconfig", w.Kubeconfig), &out, &out)
		t.Logf("%s: exit %d in %s\n%s", strings.Join(args, " "), code, time.Since(start).Round(100*time.Millisecond), out.String())
		return code, out.String()
	}
	pod := func(name string) corev1.Pod {
		t.Helper()
		var p corev1.Pod
		if err := w.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	until := func(what string, timeout time.Duration, cond func() bool) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(context.Context) (bool, error) { return cond(), nil }); err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
	}
	ready := func(p corev1.Pod) bool {
		return slices.ContainsFunc(p.Status.Conditions, func(c corev1.PodCondition) bool { return c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue })
	}
	const appPod, dbPod, brokenPod = "day2-app-z1-0", "day2-db-z1-0", "day2-broken-z1-0"
	until("app and db Ready", 3*time.Minute, func() bool {
		var a, d corev1.Pod
		return w.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: appPod}, &a) == nil && ready(a) &&
			w.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: dbPod}, &d) == nil && ready(d)
	})
	t.Logf("deployed in %s", time.Since(began).Round(100*time.Millisecond))

	// Short execs, one after another: every one's output and exit status
	// arrive (an exec cut on its way reports success with no output; ssh
	// -c then exits 255).
	execs := time.Now()
	for i := range 20 {
		var out bytes.Buffer
		code := app.Main([]string{"ssh", "app/0", "-c", fmt.Sprintf("echo exec-%d; exit %d", i, i%3), "-d", "day2", "-n", ns, "--kubeconfig", w.Kubeconfig}, &out, &out)
		if want := fmt.Sprintf("exec-%d", i); code != i%3 || strings.TrimSpace(out.String()) != want {
			t.Errorf("ssh -c #%d: exit %d, %q; want %d, %q", i, code, out.String(), i%3, want)
		}
	}
	t.Logf("20 short execs in %s", time.Since(execs).Round(100*time.Millisecond))

	type row map[string]string
	instances := func(args ...string) []row {
		t.Helper()
		code, out := cli(append([]string{"instances", "--json"}, args...)...)
		var doc struct{ Tables []struct{ Rows []row } }
		if err := json.Unmarshal([]byte(out), &doc); code != 0 || err != nil {
			t.Fatalf("instances: exit %d, %v", code, err)
		}
		return doc.Tables[0].Rows
	}
	// instances --ps: a row per instance (then per process), as the pods
	// are; broken's post-start fails, and only broken is failing.
	// broken is started once db is Ready, as the deploy orders the groups:
	// on a loaded node its pod takes a while yet.
	until("broken failing", 3*time.Minute, func() bool {
		return slices.ContainsFunc(instances(), func(r row) bool {
			return strings.HasPrefix(r["instance"], "broken/") && r["process_state"] == "failing"
		})
	})
	rows := instances("--ps", "--details")
	var failing []string
	for _, r := range rows {
		if r["instance"] == "" {
			continue
		}
		p := pod(r["vm_cid"])
		if p.Status.PodIP != r["ips"] || r["index"] != "0" || r["bootstrap"] != "true" || r["az"] != "z1" ||
			!strings.HasPrefix(p.Name, "day2-"+strings.Split(r["instance"], "/")[0]+"-") {
			t.Errorf("row %v does not match pod %s (%s)", r, p.Name, p.Status.PodIP)
		}
		if r["process_state"] != "running" {
			failing = append(failing, r["instance"])
		}
	}
	processes := slices.DeleteFunc(slices.Clone(rows), func(r row) bool { return r["process"] == "" })
	if len(failing) != 1 || !strings.HasPrefix(failing[0], "broken/") || len(processes) != 3 ||
		!slices.ContainsFunc(processes, func(r row) bool { return r["process"] == "lifecycled" && r["process_state"] == "running" }) {
		t.Errorf("instances --ps: failing %v, processes %v", failing, processes)
	}
	if code, out := cli("instances", "--failing"); code != 0 || !strings.Contains(out, "broken/") || strings.Contains(out, "app/") {
		t.Errorf("instances --failing: exit %d", code)
	}

	// ssh -c runs as vcap (root with --root); logs holds each job's logs;
	// variables names the generated password, never its value.
	if code, out := cli("ssh", "app/0", "-c", "id -u"); code != 0 || strings.TrimSpace(out) != "1000" {
		t.Errorf("ssh -c 'id -u': exit %d, %q, want 1000", code, out)
	}
	dir := t.TempDir()
	if code, _ := cli("logs", "app/0", "--dir", dir); code != 0 {
		t.Fatal("logs failed")
	}
	tarballs, _ := filepath.Glob(filepath.Join(dir, "day2.app.0-*.tgz"))
	if len(tarballs) != 1 {
		t.Fatalf("logs wrote %v", tarballs)
	}
	entries, err := fixtures.TgzFiles(tarballs[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"lifecycled/lifecycled.stdout.log", "lifecycled/lifecycled.stderr.log", "lifecycled/lifecycle.log"} {
		if _, ok := entries[want]; !ok {
			t.Errorf("logs tarball lacks %s: %v", want, slices.Sorted(maps.Keys(entries)))
		}
	}
	password, err := w.Credential(ctx, "/bosh-injector/day2/day2_db_password")
	if err != nil {
		t.Fatal(err)
	}
	if code, out := cli("variables"); code != 0 || !strings.Contains(out, "/bosh-injector/day2/day2_db_password") || !strings.Contains(out, "password") ||
		strings.Contains(out, strings.Trim(password, `"`)) {
		t.Errorf("variables: exit %d", code)
	}
	if code, out := cli("events"); code != 0 || !strings.Contains(out, "create") {
		t.Errorf("events: exit %d", code)
	}

	uids := func() map[string]types.UID {
		out := map[string]types.UID{}
		for _, n := range []string{appPod, dbPod, brokenPod} {
			out[n] = pod(n).UID
		}
		return out
	}
	before := uids()
	lifecycleLog := func() string {
		t.Helper()
		code, out := cli("ssh", "app/0", "--root", "-c", "cat /var/vcap/sys/log/lifecycled/lifecycle.log")
		if code != 0 {
			t.Errorf("reading the lifecycle log: exit %d", code)
		}
		return out
	}

	// stop: drain runs, the pod stays, not Ready (out of its Services'
	// endpoints) when stop returns, and a restart of its container keeps it
	// stopped.
	if code, out := cli("stop", "app/0"); code != 0 || !strings.Contains(out, "Updating instance app: app/") {
		t.Fatalf("stop: exit %d", code)
	}
	if ready(pod(appPod)) {
		t.Errorf("stop returned with pod %s still Ready", appPod)
	}
	if log := lifecycleLog(); !strings.Contains(log, "pre-stop vm=keep instance=keep") || !strings.Contains(log, "drain job_shutdown hash_unchanged") {
		t.Errorf("stop ran no pre-stop and drain:\n%s", log)
	}
	if p := pod(appPod); p.UID != before[appPod] {
		t.Errorf("stopped: pod %s uid %s (was %s)", appPod, p.UID, before[appPod])
	}
	restarts := pod(appPod).Status.ContainerStatuses[0].RestartCount
	cli("ssh", "app/0", "--root", "-c", "kill 1")
	until("the container's restart", time.Minute, func() bool {
		p := pod(appPod)
		return len(p.Status.ContainerStatuses) > 0 && p.Status.ContainerStatuses[0].RestartCount > restarts && p.Status.ContainerStatuses[0].State.Running != nil
	})
	until("the restarted launcher's status", 30*time.Second, func() bool {
		r := instances("app/0")
		return len(r) == 1 && r[0]["process_state"] == "stopped"
	})
	// The kubelet's readiness probe turns it not Ready (failureThreshold
	// probes after the stop) and keeps it so.
	until("the stopped pod not Ready", 30*time.Second, func() bool { return !ready(pod(appPod)) })

	// Its pod replaced (deleted, as a drain's eviction or a lost node
	// replaces it): the new pod starts stopped, as a director keeps a
	// stopped instance stopped across its VM's recreation, until start.
	old := pod(appPod)
	if err := w.Client.Delete(ctx, &old); err != nil {
		t.Fatal(err)
	}
	until("app/0's new pod with its processes stopped", 2*time.Minute, func() bool {
		var p corev1.Pod
		if w.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: appPod}, &p) != nil || p.UID == old.UID || p.Status.Phase != corev1.PodRunning {
			return false
		}
		r := instances("app/0", "--details")
		return len(r) == 1 && r[0]["process_state"] == "stopped" && r[0]["state"] == "stopped"
	})
	if p := pod(appPod); ready(p) {
		t.Errorf("the stopped instance's new pod %s is Ready", p.Name)
	}
	if now := uids(); now[dbPod] != before[dbPod] || now[brokenPod] != before[brokenPod] {
		t.Errorf("pod UIDs before %v, now %v: db's and broken's should not change", before, now)
	}
	before[appPod] = pod(appPod).UID

	// start, then restart: in the same pod, post-start and drain again.
	if code, _ := cli("start", "app/0"); code != 0 || !ready(pod(appPod)) {
		t.Fatalf("start: exit %d", code)
	}
	if code, _ := cli("restart", "app"); code != 0 || !ready(pod(appPod)) {
		t.Fatalf("restart: exit %d", code)
	}
	// The new pod's log (on an emptyDir) has start's post-start, and
	// restart's drain and post-start.
	if log := lifecycleLog(); strings.Count(log, "drain job_shutdown") != 1 || strings.Count(log, "post-start") != 2 {
		t.Errorf("after start and restart the lifecycle log is:\n%s", log)
	}

	// recreate db/0: a new pod on the same disk.
	marker := func() string {
		_, out := cli("ssh", "db/0", "-c", "cat /var/vcap/store/pgstore/day2-marker; sync")
		return strings.TrimSpace(out)
	}
	if code, _ := cli("ssh", "db/0", "--root", "-c", "echo day2-bytes > /var/vcap/store/pgstore/day2-marker && sync"); code != 0 {
		t.Fatal("writing to db's disk failed")
	}
	if m := marker(); m != "day2-bytes" {
		t.Fatalf("db's disk holds %q", m)
	}
	if code, _ := cli("recreate", "db/0"); code != 0 {
		t.Fatal("recreate failed")
	}
	if m := marker(); m != "day2-bytes" {
		t.Errorf("after recreate db's disk holds %q", m)
	}
	after := uids()
	if after[dbPod] == before[dbPod] || after[appPod] != before[appPod] || after[brokenPod] != before[brokenPod] {
		t.Errorf("pod UIDs before %v, after %v: only db's should change", before, after)
	}

	// delete-deployment: only the orphaned claim stays in the namespace, and
	// the credentials on the config server, as a director's delete leaves
	// CredHub's.
	if code, out := cli("delete-deployment"); code != 0 || !strings.Contains(out, "Orphaning disk") {
		t.Fatalf("delete-deployment: exit %d", code)
	}
	var left []string
	until("nothing of the deployment left", time.Minute, func() bool {
		left = nil
		for _, l := range []struct {
			kind string
			list client.ObjectList
		}{{"Pod", &corev1.PodList{}}, {"Secret", &corev1.SecretList{}}, {"ConfigMap", &corev1.ConfigMapList{}}, {"Service", &corev1.ServiceList{}},
			{"PersistentVolumeClaim", &corev1.PersistentVolumeClaimList{}}, {"ServiceAccount", &corev1.ServiceAccountList{}},
			{"StatefulSet", &appsv1.StatefulSetList{}}, {"Job", &batchv1.JobList{}}, {"Role", &rbacv1.RoleList{}}, {"RoleBinding", &rbacv1.RoleBindingList{}},
			{"PodDisruptionBudget", &policyv1.PodDisruptionBudgetList{}}} {
			if err := w.Client.List(ctx, l.list, client.InNamespace(ns)); err != nil {
				t.Fatal(err)
			}
			items, _ := apimeta.ExtractList(l.list)
			for _, item := range items {
				o, kind := item.(client.Object), l.kind
				switch {
				case kind == "ConfigMap" && o.GetName() == "kube-root-ca.crt", kind == "ServiceAccount" && o.GetName() == "default":
				case kind == "PersistentVolumeClaim" && o.GetLabels()[names.LabelOrphaned] == "true" && o.GetAnnotations()[names.AnnotationOrphanedInstance] != "":
				default:
					left = append(left, kind+" "+o.GetName())
				}
			}
		}
		return len(left) == 0
	})
	if kept, err := w.Credential(ctx, "/bosh-injector/day2/day2_db_password"); err != nil || kept != password {
		t.Errorf("the password after delete-deployment: %v", err)
	}
	var claims corev1.PersistentVolumeClaimList
	if err := w.Client.List(ctx, &claims, client.InNamespace(ns), client.MatchingLabels{names.LabelOrphaned: "true"}); err != nil || len(claims.Items) != 1 ||
		!strings.HasPrefix(claims.Items[0].Annotations[names.AnnotationOrphanedInstance], "db/") {
		t.Errorf("orphaned claims: %+v %v", claims.Items, err)
	}
	t.Logf("day-2 commands in %s", time.Since(began).Round(100*time.Millisecond))
}
