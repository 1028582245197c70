package e2e_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bosh-injector/bosh-injector/cmd/bosh-injector/app"
	"github.com/bosh-injector/bosh-injector/gather/gathering/objects"
	"github.com/bosh-injector/bosh-injector/gather/model/deployment"
	"github.com/bosh-injector/bosh-injector/gather/model/instance"
	"github.com/bosh-injector/bosh-injector/gather/names"
	"github.com/bosh-injector/bosh-injector/gather/operator/status"
	"github.com/bosh-injector/bosh-injector/test/fixtures"
	"github.com/bosh-injector/bosh-injector/test/walkthrough"
)

// TestPersistentDisks runs the shop deployment's db group with three
// instances, as `objects` prints it, in a namespace of its own, writes
// bytes to each instance's persistent disk, and checks after each
// operation that the bytes are there and the instances Ready: a rollout,
// a recreate (every pod deleted); the group scaled down to two (index 2's claim orphaned, which
// `disks --orphaned` lists with its instance) and up to three again (the
// claim mounted back); a larger disk applied as users apply it (objects'
// output through kubectl apply; taken by the webhook, each instance
// drained then grown, one at a time, `df` in the pod showing the new size,
// the operator restarted meanwhile); a smaller one refused; index 2's disk,
// orphaned again, attached to index 1 (attach-disk), whose own disk is
// orphaned; index 0's node drained (it waits for its node, its disk
// being there) and uncordoned.
func TestPersistentDisks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w, releaseURL, _ := startWalkthrough(t)
	began := time.Now()
	const ns = "disks"
	gst, err := w.Deploy(ctx, ns, fixtures.Shop(releaseURL, "scale-db.yml"))
	if err != nil || gst.State != status.ReasonGathered {
		t.Fatalf("gathering: %+v %v", gst, err)
	}
	manifest, sts := statefulSetOf(ctx, t, w.Client, ns, fixtures.ManifestSecret, "db", objects.Options{Namespace: ns})
	if sts == nil || sts.Spec.PersistentVolumeClaimRetentionPolicy == nil {
		t.Fatalf("objects printed no db StatefulSet retaining its claims: %+v", sts)
	}
	if err := w.Client.Create(ctx, sts); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(sts)
	pod := func(i int) string { return fmt.Sprintf("%s-%d", sts.Name, i) }
	claim := func(i int) string { return fmt.Sprintf("%s-%s-%d", objects.VolumeStore, sts.Name, i) }
	const container = "pgstore-pgstore"
	const marker = "/var/vcap/store/pgstore/marker"

	// ready waits until the group's first n instances are Ready and
	// returns their pods' UIDs.
	ready := func(n int, what string) map[int]types.UID {
		t.Helper()
		uids := map[int]types.UID{}
		deadline := time.Now().Add(3 * time.Minute)
		for {
			clear(uids)
			for i := range n {
				var p corev1.Pod
				if w.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: pod(i)}, &p) == nil && p.DeletionTimestamp == nil && podReady(&p) {
					uids[i] = p.UID
				}
			}
			if len(uids) == n {
				t.Logf("%s: %d instances Ready after %s", what, n, time.Since(began).Round(time.Second))
				return uids
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d of %d instances Ready\n%s", what, len(uids), n, w.OperatorLogs(ctx))
			}
			time.Sleep(time.Second)
		}
	}
	exec := func(i int, script string) string {
		t.Helper()
		out, err := w.Kubectl(ctx, "exec", "-n", ns, pod(i), "-c", container, "--", "sh", "-c", script)
		if err != nil {
			t.Fatalf("exec in %s: %v\n%s", pod(i), err, out)
		}
		return out
	}
	written := map[int]string{}
	intact := func(what string, indexes ...int) {
		t.Helper()
		for _, i := range indexes {
			if got := exec(i, "cat "+marker); got != written[i] {
				t.Errorf("%s: %s holds %q, want %q", what, pod(i), got, written[i])
			}
		}
	}

	// The deploy controller rolls the new StatefulSet to the accepted
	// version first: the bytes are written after that.
	deployed(ctx, t, w.Client, &manifest)
	ready(3, "created")
	for i := range 3 {
		written[i] = fmt.Sprintf("instance %d, %d\n", i, time.Now().UnixNano())
		exec(i, fmt.Sprintf("printf '%%s' '%s' > %s && sync", written[i], marker))
	}

	// A rollout of the group (a change to its pod template), then a
	// recreate (every pod deleted at once): each pod is made again on
	// its claim.
	replaced := func(what string, before map[int]types.UID) {
		t.Helper()
		deadline := time.Now().Add(3 * time.Minute)
		for {
			after := ready(3, what)
			same := 0
			for i, uid := range after {
				if before[i] == uid {
					same++
				}
			}
			if same == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d pods not replaced", what, same)
			}
			time.Sleep(time.Second)
		}
		intact(what, 0, 1, 2)
	}
	before := ready(3, "before the rollout")
	var rolled appsv1.StatefulSet
	if err := w.Client.Get(ctx, key, &rolled); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(rolled.DeepCopy())
	if rolled.Spec.Template.Annotations == nil {
		rolled.Spec.Template.Annotations = map[string]string{}
	}
	rolled.Spec.Template.Annotations["disks-test/rollout"] = "1"
	if err := w.Client.Patch(ctx, &rolled, patch); err != nil {
		t.Fatal(err)
	}
	replaced("rollout", before)
	before = ready(3, "before the recreate")
	for i := range 3 {
		if err := w.Client.Delete(ctx, &corev1.Pod{ObjectMeta: podMeta(ns, pod(i))}); err != nil {
			t.Fatal(err)
		}
	}
	replaced("recreate", before)

	// Scaled down: index 2's claim stays, orphaned, listed with its
	// instance as `bosh disks --orphaned` lists it.
	scale(ctx, t, w.Client, key, 2)
	orphan := waitClaim(ctx, t, w.Client, client.ObjectKey{Namespace: ns, Name: claim(2)}, func(c *corev1.PersistentVolumeClaim) bool {
		return c.Labels[names.LabelOrphaned] == "true"
	})
	wantInstance := "db/" + instance.ID("shop", "db", 2) + " (2)"
	if got := orphan.Annotations[names.AnnotationOrphanedInstance]; got != wantInstance {
		t.Errorf("orphaned claim's instance = %q, want %q", got, wantInstance)
	}
	var listed bytes.Buffer
	if code := app.Main([]string{"disks", "--orphaned", "-n", ns, "--kubeconfig", w.Kubeconfig}, &listed, &listed); code != 0 ||
		!strings.Contains(listed.String(), claim(2)) || !strings.Contains(listed.String(), wantInstance) {
		t.Errorf("disks --orphaned: exit %d\n%s", code, listed.String())
	}
	t.Logf("disks --orphaned:\n%s", listed.String())
	intact("scaled down", 0, 1)

	// Scaled up: the StatefulSet mounts index 2's claim again, with its
	// bytes, and the operator takes the orphan label off.
	scale(ctx, t, w.Client, key, 3)
	ready(3, "scaled up")
	waitClaim(ctx, t, w.Client, client.ObjectKey{Namespace: ns, Name: claim(2)}, func(c *corev1.PersistentVolumeClaim) bool {
		return c.Labels[names.LabelOrphaned] == ""
	})
	intact("scaled up", 0, 1, 2)

	// A larger disk, applied as `objects` would print it: the webhook
	// keeps the immutable template and records the size; the operator
	// grows the claims instance by instance (max_in_flight 1), each
	// drained (its pod deleted) before its claim grows, and the
	// cluster's CSI driver grows the filesystem online.
	var live appsv1.StatefulSet
	// The StatefulSet controller writes its status meanwhile.
	resize := func(size string) error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := w.Client.Get(ctx, key, &live); err != nil {
				return err
			}
			live.Spec.VolumeClaimTemplates[0].Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse(size)
			return w.Client.Update(ctx, &live)
		})
	}
	// The job's directory is the claim's mount (a subPath of it).
	df := func(i int) int64 {
		t.Helper()
		var kib int64
		out := exec(i, "df -Pk /var/vcap/store/pgstore | awk 'NR==2 {print $2}'")
		if _, err := fmt.Sscan(out, &kib); err != nil {
			t.Fatalf("df in %s: %q", pod(i), out)
		}
		return kib << 10
	}
	if size := df(0); size > 1<<30 {
		t.Errorf("df before the resize: %d bytes, want at most 1 GiB", size)
	}
	before = ready(3, "before the resize")
	// As a user applies it: persistent_disk grown in the manifest, what
	// `objects` prints of it through kubectl apply (the manifest Secret
	// and db's objects: the namespace runs db alone).
	larger := deployment.OpsFile{Name: "larger-db.yml", Data: []byte("- type: replace\n  path: /instance_groups/name=db/persistent_disk\n  value: 2048\n")}
	res, err := objects.Build(manifest.Data[names.ManifestKey], append(deployment.OpsFilesOf(manifest.Data), larger), objects.Options{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	applied := slices.DeleteFunc(res.Objects, func(o client.Object) bool {
		_, secret := o.(*corev1.Secret)
		return !secret && o.GetName() != sts.Name && o.GetName() != "shop-db"
	})
	yaml, err := objects.EncodeAll(applied)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "objects.yaml")
	if err := os.WriteFile(file, yaml, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := w.Client.Get(ctx, client.ObjectKeyFromObject(&manifest), &manifest); err != nil {
		t.Fatal(err)
	}
	versionBefore := status.GatheringOf(&manifest).Versions[names.LabelValue("db")]
	if out, err := w.Kubectl(ctx, "apply", "-f", file); err != nil {
		t.Fatalf("kubectl apply of a larger disk: %v\n%s", err, out)
	} else {
		t.Logf("kubectl apply of a larger disk:\n%s", out)
	}
	if err := w.Client.Get(ctx, key, &live); err != nil {
		t.Fatal(err)
	}
	if got := live.Annotations[names.AnnotationDiskSizes]; got != `{"store":"2Gi"}` {
		t.Errorf("wanted sizes = %q", got)
	}
	two := resource.MustParse("2Gi")
	grown := map[int]bool{}
	// The operator restarts in the middle: once the first instance is
	// drained, its pod is deleted; the new one resumes from the claims.
	restarted := false
	deadline := time.Now().Add(resizeBound)
	for len(grown) < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("resize: claims grown %v after %s\n%s\n%s", grown, resizeBound, diskState(ctx, w.Client, ns), w.OperatorLogs(ctx))
		}
		var pods corev1.PodList
		if err := w.Client.List(ctx, &pods, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		down := 3
		uid := map[int]types.UID{}
		for _, p := range pods.Items {
			for i := range 3 {
				if p.Name == pod(i) && p.DeletionTimestamp == nil {
					uid[i] = p.UID
					if podReady(&p) {
						down--
					}
				}
			}
		}
		if down > 1 {
			t.Fatalf("resize: %d instances down at once with max_in_flight 1\n%s\n%s", down, diskState(ctx, w.Client, ns), w.OperatorLogs(ctx))
		}
		for i := range 3 {
			var c corev1.PersistentVolumeClaim
			if err := w.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: claim(i)}, &c); err != nil {
				t.Fatal(err)
			}
			spec := c.Spec.Resources.Requests[corev1.ResourceStorage]
			if spec.Cmp(two) >= 0 && !grown[i] && uid[i] == before[i] {
				t.Fatalf("resize: %s grew while its pod %s was not drained", claim(i), pod(i))
			}
			capacity := c.Status.Capacity[corev1.ResourceStorage]
			if capacity.Cmp(two) >= 0 {
				grown[i] = true
			}
			if !restarted && c.Annotations[names.AnnotationDrainedPod] != "" {
				if out, err := w.Kubectl(ctx, "delete", "pod", "-n", walkthrough.Namespace, "-l", "app.kubernetes.io/name=bosh-injector,app.kubernetes.io/instance="+walkthrough.Release, "--wait=false"); err != nil {
					t.Fatalf("restarting the operator: %v\n%s", err, out)
				}
				restarted = true
				t.Logf("operator restarted while %s was resized", claim(i))
			}
		}
		if why := live.Annotations[names.AnnotationDiskResize]; why != "" {
			t.Fatalf("resize stopped: %s", why)
		}
		time.Sleep(200 * time.Millisecond)
		if err := w.Client.Get(ctx, key, &live); err != nil {
			t.Fatal(err)
		}
	}
	// The manifest's larger disk is a new version of db too: its deploy
	// rolls the group, beside the resize or after it (a step waits for a
	// drained instance). The instances are read once it is deployed.
	rolledOut(ctx, t, w.Client, &manifest, key, versionBefore)
	replaced("resized", before)
	for i := range 3 {
		if size := df(i); size < 2<<30*9/10 {
			t.Errorf("df in %s after the resize: %d bytes, want about 2 GiB", pod(i), size)
		}
	}

	// A smaller disk is refused with the reason.
	if err := resize("512Mi"); err == nil || !strings.Contains(err.Error(), "cannot shrink") {
		t.Errorf("applying a smaller disk: %v", err)
	}
	intact("resize refused", 0, 1, 2)

	// attach-disk: index 2's disk, orphaned by a scale-down, becomes
	// index 1's; index 1's own disk is orphaned with its instance.
	scale(ctx, t, w.Client, key, 2)
	waitClaim(ctx, t, w.Client, client.ObjectKey{Namespace: ns, Name: claim(2)}, func(c *corev1.PersistentVolumeClaim) bool {
		return c.Labels[names.LabelOrphaned] == "true"
	})
	var attached bytes.Buffer
	if code := app.Main([]string{"attach-disk", "-d", "shop", "-n", ns, "--kubeconfig", w.Kubeconfig, "db/1", claim(2)}, &attached, &attached); code != 0 {
		t.Fatalf("attach-disk: exit %d\n%s", code, attached.String())
	}
	t.Logf("attach-disk:\n%s", attached.String())
	ready(2, "disk attached")
	if got := exec(1, "cat "+marker); got != written[2] {
		t.Errorf("after attach-disk, %s holds %q, want index 2's %q", pod(1), got, written[2])
	}
	intact("disk attached", 0)
	listed.Reset()
	wantInstance = "db/" + instance.ID("shop", "db", 1) + " (1)"
	if code := app.Main([]string{"disks", "--orphaned", "-n", ns, "--kubeconfig", w.Kubeconfig}, &listed, &listed); code != 0 ||
		!strings.Contains(listed.String(), claim(1)+"-orphan-") || !strings.Contains(listed.String(), wantInstance) {
		t.Errorf("disks --orphaned after attach-disk: exit %d\n%s", code, listed.String())
	}
	// A node drain: the disk stays on its node, so the evicted instance
	// waits, unscheduled, until the node is uncordoned, then comes back
	// there on its disk.
	var p0 corev1.Pod
	if err := w.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: pod(0)}, &p0); err != nil {
		t.Fatal(err)
	}
	node := p0.Spec.NodeName
	if out, err := w.Kubectl(ctx, "drain", node, "--pod-selector=statefulset.kubernetes.io/pod-name="+pod(0),
		"--ignore-daemonsets", "--delete-emptydir-data", "--timeout=3m"); err != nil {
		t.Fatalf("kubectl drain %s: %v\n%s", node, err, out)
	}
	waitPod := func(what string, done func(*corev1.Pod) bool) *corev1.Pod {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for {
			var p corev1.Pod
			if err := w.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: pod(0)}, &p); err == nil && p.UID != p0.UID && done(&p) {
				return &p
			}
			if time.Now().After(deadline) {
				t.Fatalf("drain: %s: not after a minute", what)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	waitPod("the new pod unschedulable", func(p *corev1.Pod) bool {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
				return true
			}
		}
		return false
	})
	if out, err := w.Kubectl(ctx, "uncordon", node); err != nil {
		t.Fatalf("kubectl uncordon %s: %v\n%s", node, err, out)
	}
	if p := waitPod("back on its node", func(p *corev1.Pod) bool { return p.Spec.NodeName != "" }); p.Spec.NodeName != node {
		t.Errorf("drain: %s came back on %s, its disk is on %s", pod(0), p.Spec.NodeName, node)
	}
	ready(2, "node drained and uncordoned")
	intact("node drained", 0)
	t.Logf("persistent disk checks took %s", time.Since(began).Round(time.Second))
}

// resizeBound is how long a larger disk applied to the three db instances
// may take, each drained, grown and Ready again (README's bound).
const resizeBound = 5 * time.Minute

// diskState says, for a failed resize, what the StatefulSets, claims and
// pods of ns are and what Events they had.
func diskState(ctx context.Context, c client.Client, ns string) string {
	var b strings.Builder
	var sets appsv1.StatefulSetList
	_ = c.List(ctx, &sets, client.InNamespace(ns))
	for _, s := range sets.Items {
		fmt.Fprintf(&b, "StatefulSet %s: partition %v, annotations %v, status %+v\n", s.Name, s.Spec.UpdateStrategy.RollingUpdate, s.Annotations, s.Status)
	}
	var claims corev1.PersistentVolumeClaimList
	_ = c.List(ctx, &claims, client.InNamespace(ns))
	for _, pvc := range claims.Items {
		fmt.Fprintf(&b, "claim %s: spec %s, annotations %v, status %+v\n", pvc.Name, pvc.Spec.Resources.Requests.Storage(), pvc.Annotations, pvc.Status)
	}
	var pods corev1.PodList
	_ = c.List(ctx, &pods, client.InNamespace(ns))
	for _, p := range pods.Items {
		fmt.Fprintf(&b, "pod %s: uid %s, phase %s, ready %v, gates %v, deleted %v\n", p.Name, p.UID, p.Status.Phase, podReady(&p), p.Spec.SchedulingGates, p.DeletionTimestamp)
	}
	var secrets corev1.SecretList
	_ = c.List(ctx, &secrets, client.InNamespace(ns))
	for _, s := range secrets.Items {
		if status.IsManifest(&s) {
			fmt.Fprintf(&b, "manifest Secret %s: labels %v, deploy %s\n", s.Name, s.Labels, s.Annotations[names.AnnotationDeploy])
		}
	}
	var events corev1.EventList
	_ = c.List(ctx, &events, client.InNamespace(ns))
	for _, e := range events.Items {
		fmt.Fprintf(&b, "event %s %s/%s %s: %s\n", e.LastTimestamp.Format(time.TimeOnly), e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
	}
	return b.String()
}

// statefulSetOf is the manifest Secret secret of namespace ns and the
// StatefulSet `objects` prints for its group (nil without one).
func statefulSetOf(ctx context.Context, t *testing.T, c client.Client, ns, secret, group string, opts objects.Options) (corev1.Secret, *appsv1.StatefulSet) {
	t.Helper()
	var manifest corev1.Secret
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: secret}, &manifest); err != nil {
		t.Fatal(err)
	}
	res, err := objects.Build(manifest.Data[names.ManifestKey], deployment.OpsFilesOf(manifest.Data), opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range res.Objects {
		if s, ok := o.(*appsv1.StatefulSet); ok && s.Spec.Template.Labels[names.LabelInstanceGroup] == group {
			return manifest, s
		}
	}
	return manifest, nil
}

// deployed waits until the deploy controller deployed the manifest.
func deployed(ctx context.Context, t *testing.T, c client.Client, manifest *corev1.Secret) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for manifest.Labels[names.LabelDeployState] != status.PhaseDeployed {
		if time.Now().After(deadline) {
			t.Fatalf("deploy: %s", manifest.Annotations[names.AnnotationDeploy])
		}
		time.Sleep(time.Second)
		if err := c.Get(ctx, client.ObjectKeyFromObject(manifest), manifest); err != nil {
			t.Fatal(err)
		}
	}
}

// rolledOut waits until a version of db above was gathered and deployed
// and the StatefulSet key runs it on every pod.
func rolledOut(ctx context.Context, t *testing.T, c client.Client, manifest *corev1.Secret, key client.ObjectKey, above int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Minute)
	for {
		if err := c.Get(ctx, client.ObjectKeyFromObject(manifest), manifest); err != nil {
			t.Fatal(err)
		}
		var s appsv1.StatefulSet
		if err := c.Get(ctx, key, &s); err != nil {
			t.Fatal(err)
		}
		replicas := ptr.Deref(s.Spec.Replicas, 1)
		if status.GatheringOf(manifest).Versions[names.LabelValue("db")] > above && manifest.Labels[names.LabelDeployState] == status.PhaseDeployed &&
			s.Status.ObservedGeneration == s.Generation && s.Status.UpdateRevision == s.Status.CurrentRevision &&
			s.Status.UpdatedReplicas == replicas && s.Status.ReadyReplicas == replicas {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("db's new version not rolled out: deploy %s, StatefulSet status %+v", manifest.Annotations[names.AnnotationDeploy], s.Status)
		}
		time.Sleep(time.Second)
	}
}

func podMeta(ns, name string) metav1.ObjectMeta { return metav1.ObjectMeta{Namespace: ns, Name: name} }

func scale(ctx context.Context, t *testing.T, c client.Client, key client.ObjectKey, n int32) {
	t.Helper()
	var s appsv1.StatefulSet
	if err := c.Get(ctx, key, &s); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(s.DeepCopy())
	s.Spec.Replicas = ptr.To(n)
	if err := c.Patch(ctx, &s, patch); err != nil {
		t.Fatal(err)
	}
}

func waitClaim(ctx context.Context, t *testing.T, c client.Client, key client.ObjectKey, done func(*corev1.PersistentVolumeClaim) bool) *corev1.PersistentVolumeClaim {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		var p corev1.PersistentVolumeClaim
		err := c.Get(ctx, key, &p)
		if err == nil && done(&p) {
			return &p
		}
		if time.Now().After(deadline) {
			t.Fatalf("claim %s: %v %+v", key.Name, err, p.ObjectMeta)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// TestNamedDisks runs the named-disks fixture (persistent_disks: index and
// blob_store) as `objects` prints it: each disk is a claim of its own,
// mounted at /var/vcap/instance/disks/<name> in the job's container; bytes
// written to both are there after the pod is deleted and made again.
func TestNamedDisks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w, releaseURL, _ := startWalkthrough(t)
	began := time.Now()
	const ns = "named-disks"
	gst, err := w.Deploy(ctx, ns, fixtures.Deployment("named-disks", releaseURL))
	if err != nil || gst.State != status.ReasonGathered {
		t.Fatalf("gathering: %+v %v", gst, err)
	}
	manifest, sts := statefulSetOf(ctx, t, w.Client, ns, "named-disks-manifest", "archive", objects.Options{Namespace: ns,
		DiskSizes: map[string]resource.Quantity{"small": resource.MustParse("64Mi"), "large": resource.MustParse("128Mi")}})
	if sts == nil || len(sts.Spec.VolumeClaimTemplates) != 2 {
		t.Fatalf("objects printed no StatefulSet with two claims: %+v", sts)
	}
	if err := w.Client.Create(ctx, sts); err != nil {
		t.Fatal(err)
	}
	pod := sts.Name + "-0"
	disks := map[string]string{"index": names.NamedDiskVolume("index"), "blob_store": names.NamedDiskVolume("blob_store")}
	// running waits for the instance's pod, other than the one of UID
	// old, to be Ready.
	running := func(old types.UID, what string) types.UID {
		t.Helper()
		deadline := time.Now().Add(3 * time.Minute)
		for {
			var p corev1.Pod
			if w.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: pod}, &p) == nil && p.UID != old && p.DeletionTimestamp == nil && podReady(&p) {
				t.Logf("%s: Ready after %s", what, time.Since(began).Round(time.Second))
				return p.UID
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %s not Ready\n%s", what, pod, w.OperatorLogs(ctx))
			}
			time.Sleep(time.Second)
		}
	}
	exec := func(script string) string {
		t.Helper()
		out, err := w.Kubectl(ctx, "exec", "-n", ns, pod, "-c", "lifecycled-lifecycled", "--", "sh", "-c", script)
		if err != nil {
			t.Fatalf("exec in %s: %v\n%s", pod, err, out)
		}
		return out
	}
	deployed(ctx, t, w.Client, &manifest)
	uid := running("", "created")
	written := map[string]string{}
	for disk := range disks {
		dir := names.NamedDisksDir + disk
		// Each disk is a mount of its own, not a directory of another.
		if out := exec("grep -c ' " + dir + " ' /proc/mounts"); strings.TrimSpace(out) != "1" {
			t.Errorf("%s is not a mount: %q", dir, out)
		}
		written[disk] = fmt.Sprintf("%s %d\n", disk, time.Now().UnixNano())
		exec(fmt.Sprintf("printf '%%s' '%s' > %s/marker && sync", written[disk], dir))
	}
	if err := w.Client.Delete(ctx, &corev1.Pod{ObjectMeta: podMeta(ns, pod)}); err != nil {
		t.Fatal(err)
	}
	running(uid, "pod deleted")
	for disk, volume := range disks {
		if got := exec("cat " + names.NamedDisksDir + disk + "/marker"); got != written[disk] {
			t.Errorf("disk %s holds %q after the pod's deletion, want %q", disk, got, written[disk])
		}
		var c corev1.PersistentVolumeClaim
		if err := w.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: volume + "-" + pod}, &c); err != nil || c.Annotations[names.AnnotationDiskName] != disk {
			t.Errorf("claim of disk %s: %v %v", disk, c.Annotations, err)
		}
	}

	// blob_store removed from the manifest and applied as `objects` prints
	// it: the operator replaces the StatefulSet (its templates cannot
	// change), drains the instance so that its pod mounts index alone,
	// and orphans blob_store's claim; index keeps its bytes.
	removed := time.Now()
	if gst, err := w.Deploy(ctx, ns, fixtures.Deployment("named-disks", releaseURL, "named-disks-remove-blob-store.yml")); err != nil || gst.State != status.ReasonGathered {
		t.Fatalf("gathering without blob_store: %+v %v", gst, err)
	}
	_, without := statefulSetOf(ctx, t, w.Client, ns, "named-disks-manifest", "archive", objects.Options{Namespace: ns,
		DiskSizes: map[string]resource.Quantity{"small": resource.MustParse("64Mi"), "large": resource.MustParse("128Mi")}})
	var live appsv1.StatefulSet
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := w.Client.Get(ctx, client.ObjectKeyFromObject(sts), &live); err != nil {
			return err
		}
		live.Spec = without.Spec
		return w.Client.Update(ctx, &live)
	}); err != nil {
		t.Fatal(err)
	}
	blob := names.NamedDiskVolume("blob_store") + "-" + pod
	waitClaim(ctx, t, w.Client, client.ObjectKey{Namespace: ns, Name: blob}, func(c *corev1.PersistentVolumeClaim) bool {
		return c.Labels[names.LabelOrphaned] == "true" && c.Annotations[names.AnnotationOrphanedInstance] != ""
	})
	for {
		var p corev1.Pod
		err := w.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: pod}, &p)
		if err == nil && p.DeletionTimestamp == nil && podReady(&p) && !slices.ContainsFunc(p.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == disks["blob_store"] }) {
			break
		}
		if time.Since(removed) > 3*time.Minute {
			t.Fatalf("%s still mounts blob_store or is not Ready\n%s", pod, w.OperatorLogs(ctx))
		}
		time.Sleep(time.Second)
	}
	if got := exec("cat " + names.NamedDisksDir + "index/marker"); got != written["index"] {
		t.Errorf("disk index holds %q after blob_store's removal, want %q", got, written["index"])
	}
	t.Logf("blob_store removed: %s", time.Since(removed).Round(time.Second))
	t.Logf("named disks: %s", time.Since(began).Round(time.Second))
}
