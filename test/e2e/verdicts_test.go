package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bosh-injector/bosh-injector/gather/client/day2"
	"github.com/bosh-injector/bosh-injector/gather/gathering/objects"
	"github.com/bosh-injector/bosh-injector/gather/model/deployment"
	"github.com/bosh-injector/bosh-injector/gather/names"
	"github.com/bosh-injector/bosh-injector/gather/operator/status"
	"github.com/bosh-injector/bosh-injector/gather/releaseimage"
	"github.com/bosh-injector/bosh-injector/inject/runtime/contract"
	"github.com/bosh-injector/bosh-injector/test/fixtures"
	"github.com/bosh-injector/bosh-injector/test/walkthrough"
)

// The verdicts deployment's changes, as ops files on deployments/verdicts.yml
// (watch times 1000-90000: a loaded node starts a pod in seconds).
const (
	// Each new process exits twice, monit starting it again 10 s later
	// each time; both instances at once.
	verdictsFailTwice = `- type: replace
  path: /instance_groups/name=app/jobs/name=flaky/properties/flaky/failures
  value: 2
- type: replace
  path: /update/canaries
  value: 2
- type: replace
  path: /update/max_in_flight
  value: 2
`
	// Each new process exits once, the canary watched for at most 10 s:
	// it runs too late.
	verdictsSlowCanary = `- type: replace
  path: /instance_groups/name=app/jobs/name=flaky/properties/flaky/failures
  value: 1
- type: replace
  path: /update/canary_watch_time
  value: 1000-10000
`
	// A process that never runs.
	verdictsBroken = `- type: replace
  path: /instance_groups/name=app/jobs/name=flaky/properties/flaky/failures
  value: 1000000
- type: replace
  path: /update/canary_watch_time
  value: 1000-10000
`
	// The fix: a process that runs at once, a change from what runs.
	verdictsFixed = `- type: replace
  path: /instance_groups/name=app/jobs/name=flaky/properties/flaky/failures
  value: 0
- type: replace
  path: /update/max_in_flight
  value: 2
`
)

// TestVerdicts deploys two instances of release flaky, whose process exits
// as told, from the objects `objects` prints, and checks the deploy's
// verdicts on the node as a director gives them: a change whose processes
// exit twice and are started again in their containers is Deployed; a
// canary whose process exits for longer than canary_watch_time fails the
// deploy with the director's error, the other instance keeps its version
// and runs, and the deploy is finished, nothing left at a partition, by a
// retry once the process came up, or by a fixed manifest; release images
// rebuilt at the same release version (new digests) are rolled out to
// every instance, every process container on the new image. Whenever the
// deploy says Deployed, every instance runs the accepted version, all its
// containers ready. The restarts and rebuilt images, and the canaries, are
// two chains of steps, each on a deployment of its own, run at once.
func TestVerdicts(t *testing.T) {
	t.Parallel()
	// The chains run after this function returned: the rebuild's context
	// ends with the test.
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	began := time.Now()
	w, releaseURL, _ := startWalkthrough(t)

	// The release images as `release-image --manifest` pins them, built
	// again meanwhile from a copy whose job differs, at the same version.
	first, err := buildFlaky(ctx, releaseURL, fixtures.ReleaseDir("flaky"))
	if err != nil {
		t.Fatal(err)
	}
	rebuilt := make(chan built, 1)
	go func() {
		dir := filepath.Join(t.TempDir(), "flaky")
		var res []releaseimage.Result
		err := copyRelease(fixtures.ReleaseDir("flaky"), dir)
		if err == nil {
			res, err = buildFlaky(ctx, releaseURL, dir)
		}
		rebuilt <- built{res, err}
	}()

	source, err := os.ReadFile(filepath.Join(fixtures.Dir(), "deployments", "verdicts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	// Two deployments of the manifest, each in a namespace of its own,
	// take the steps in two chains at once: each step builds on the
	// deploys before it in its chain.
	t.Run("restarts, rebuilt images", func(t *testing.T) {
		t.Parallel()
		verdictsChain(t, w, source, "verdicts", first, rebuilt, stepFailTwice, stepRebuilt)
	})
	t.Run("canaries", func(t *testing.T) {
		t.Parallel()
		verdictsChain(t, w, source, "verdicts-canaries", first, nil, stepSlowCanary, stepBrokenCanary)
	})
	t.Cleanup(func() { t.Logf("all in %s", time.Since(began).Round(100*time.Millisecond)) })
}

// The steps of TestVerdicts after each chain's first deploy.
const (
	stepFailTwice = iota
	stepSlowCanary
	stepBrokenCanary
	stepRebuilt
)

// built is a build of release flaky's images.
type built struct {
	results []releaseimage.Result
	err     error
}

// verdictsChain deploys the verdicts manifest as deployment dep, in
// namespace dep, with release images first, then takes steps.
func verdictsChain(t *testing.T, w *walkthrough.Walkthrough, source []byte, dep string, first []releaseimage.Result, rebuilt <-chan built, steps ...int) {
	ctx := context.Background()
	ns, manifestName, set := dep, dep+"-manifest", dep+"-app-z1"
	canary, other := set+"-1", set+"-0"
	manifest := bytes.Replace(source, []byte("\nname: verdicts\n"), []byte("\nname: "+dep+"\n"), 1)
	opsOf := func(images []releaseimage.Result, change string) []deployment.OpsFile {
		t.Helper()
		pin, err := releaseimage.OpsFile(images)
		if err != nil {
			t.Fatal(err)
		}
		ops := []deployment.OpsFile{{Name: "release-images", Data: pin}}
		if change != "" {
			ops = append(ops, deployment.OpsFile{Name: "change", Data: []byte(change)})
		}
		return ops
	}
	apply := func(t *testing.T, ops []deployment.OpsFile) {
		t.Helper()
		gst, err := w.Deploy(ctx, ns, func(ctx context.Context, c client.Client, ns string) (*corev1.Secret, error) {
			return fixtures.Apply(ctx, c, ns, dep, manifestName, manifest, ops...)
		})
		if err != nil || gst.State != status.ReasonGathered {
			t.Fatalf("gathering: %v %+v", err, gst)
		}
	}
	tr := track(ctx, w.UserCluster.Kube, ns, names.LabelDeployment+"="+dep+","+names.LabelInstanceGroup+"=app")
	statefulSet := func(t *testing.T) *appsv1.StatefulSet {
		t.Helper()
		var s appsv1.StatefulSet
		if err := w.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: set}, &s); err != nil {
			t.Fatal(err)
		}
		return &s
	}
	// deployed waits for the deploy of the accepted version to end in
	// phase and returns its status. When it says Deployed, every
	// instance runs: each pod Ready at its StatefulSet's update revision,
	// every container ready, no partition left.
	deployed := func(t *testing.T, phase string) status.Deploy {
		t.Helper()
		deadline := time.Now().Add(2 * time.Minute)
		for {
			var s corev1.Secret
			if err := w.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: manifestName}, &s); err != nil {
				t.Fatal(err)
			}
			st, current := status.CurrentDeploy(&s)
			ended := current && s.Labels[names.LabelDeployState] == st.Phase && (st.Phase == status.PhaseDeployed || st.Phase == status.PhaseFailed)
			if ended && st.Phase != phase {
				t.Fatalf("the deploy is %s, want %s: %s", st.Phase, phase, st.Message)
			}
			if ended && phase == status.PhaseDeployed {
				running(t, w, statefulSet(t), st)
			}
			if ended {
				return st
			}
			if time.Now().After(deadline) {
				t.Fatalf("the deploy is not %s after 2m: %+v", phase, st)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	step := func(key int, name string, f func(t *testing.T)) {
		if key < 0 || slices.Contains(steps, key) {
			timedStep(t, name, f)
		}
	}

	step(-1, "the first deploy", func(t *testing.T) {
		ops := opsOf(first, "")
		apply(t, ops)
		res, err := objects.Build(manifest, ops, objects.Options{Namespace: ns})
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range res.Objects {
			if _, secret := o.(*corev1.Secret); !secret {
				if err := applyObject(ctx, w.Client, o); err != nil {
					t.Fatal(err)
				}
			}
		}
		// The deploy of the gathered version ended before the objects
		// existed: it starts their instances when they appear.
		tr.waitFor(t, 2*time.Minute, "both instances Ready", func(pods map[string]*corev1.Pod) bool {
			return len(pods) == 2 && podReady(pods[other]) && podReady(pods[canary])
		})
		deployed(t, status.PhaseDeployed)
	})

	step(stepFailTwice, "processes exiting twice before they run within the watch time: Deployed", func(t *testing.T) {
		// A failing start ends at once: the probes, however they fall,
		// never take it for running (it counts once it lived
		// runtime.StartCheck), so Deployed comes only after the third.
		apply(t, opsOf(first, verdictsFailTwice))
		st := deployed(t, status.PhaseDeployed)
		if st.Updated != 2 || st.Total != 2 {
			t.Errorf("updated %d of %d, want 2 of 2", st.Updated, st.Total)
		}
		// Their launchers say each process exited, with its output, and
		// was started again in its container.
		for _, name := range []string{other, canary} {
			gst, err := day2.LauncherStatus(ctx, w.UserCluster, getPod(t, w, ns, name))
			if err != nil {
				t.Fatal(err)
			}
			if i := slices.IndexFunc(gst.Processes, func(p contract.ProcessStatus) bool { return p.Container == "flaky-flaky" }); i < 0 ||
				gst.Processes[i].Restarts < 2 || gst.Processes[i].LastExit == nil || !strings.Contains(gst.Processes[i].LastExit.Tail, "failing start 2 of 2") {
				data, _ := json.Marshal(gst)
				t.Errorf("%s: the process did not exit before it ran: %s", name, data)
			}
		}
	})

	step(stepSlowCanary, "a canary not running by canary_watch_time's maximum fails the deploy; the other instance keeps its version; a retry once it runs finishes it", func(t *testing.T) {
		before := getPod(t, w, ns, other)
		apply(t, opsOf(first, verdictsSlowCanary))
		st := deployed(t, status.PhaseFailed)
		t.Logf("failed: %s", st.Message)
		for _, want := range []string{"'app/1 (" + canary + ")' is not running after update.", "flaky-flaky"} {
			if !strings.Contains(st.Message, want) {
				t.Errorf("the deploy's message lacks %q: %s", want, st.Message)
			}
		}
		failedEvent(t, w, ns, manifestName)
		held(t, w, statefulSet(t), before)
		// Started again by monit, the canary's process runs: the retry
		// sees it and updates the other.
		tr.waitFor(t, time.Minute, canary+" Ready", func(pods map[string]*corev1.Pod) bool { return pods[canary] != nil && podReady(pods[canary]) })
		retryDeploy(t, w, ns, manifestName, "1")
		deployed(t, status.PhaseDeployed)
	})

	step(stepBrokenCanary, "a canary that never runs fails the deploy; a fixed manifest finishes it", func(t *testing.T) {
		before := getPod(t, w, ns, other)
		apply(t, opsOf(first, verdictsBroken))
		st := deployed(t, status.PhaseFailed)
		if !strings.Contains(st.Message, "'app/1 ("+canary+")' is not running after update.") {
			t.Errorf("the deploy's message: %s", st.Message)
		}
		held(t, w, statefulSet(t), before)
		apply(t, opsOf(first, verdictsFixed))
		st = deployed(t, status.PhaseDeployed)
		if st.Updated != 2 || st.Total != 2 {
			t.Errorf("updated %d of %d, want 2 of 2", st.Updated, st.Total)
		}
	})

	step(stepRebuilt, "release images rebuilt at the same version: every instance and process container on the new images", func(t *testing.T) {
		b := <-rebuilt
		if b.err != nil {
			t.Fatal(b.err)
		}
		if b.results[0].Digest == first[0].Digest {
			t.Fatalf("the rebuilt image has the first's digest %s", first[0].Digest)
		}
		// The objects stay the same: the template's image names the
		// release, not its digest.
		templates := func(images []releaseimage.Result) []corev1.PodTemplateSpec {
			res, err := objects.Build(manifest, opsOf(images, verdictsFixed), objects.Options{Namespace: ns})
			if err != nil {
				t.Fatal(err)
			}
			var out []corev1.PodTemplateSpec
			for _, o := range res.Objects {
				if s, ok := o.(*appsv1.StatefulSet); ok {
					out = append(out, s.Spec.Template)
				}
			}
			return out
		}
		if a, b := templates(first), templates(b.results); !reflect.DeepEqual(a, b) {
			t.Errorf("objects printed other pod templates for the rebuilt images:\n%+v\n%+v", a, b)
		}
		apply(t, opsOf(b.results, verdictsFixed))
		st := deployed(t, status.PhaseDeployed)
		if st.Updated != 2 || st.Total != 2 {
			t.Errorf("updated %d of %d, want 2 of 2", st.Updated, st.Total)
		}
		ref := b.results[0].Ref()
		for _, name := range []string{other, canary} {
			pod := getPod(t, w, ns, name)
			var images []string
			for _, c := range slices.Concat(pod.Spec.InitContainers, pod.Spec.Containers) {
				if strings.Contains(c.Image, "/flaky") {
					images = append(images, c.Name+" "+c.Image)
					if c.Image != ref {
						t.Errorf("%s: container %s runs %s, want %s", name, c.Name, c.Image, ref)
					}
				}
			}
			for _, v := range pod.Spec.Volumes {
				if v.Image != nil && strings.Contains(v.Image.Reference, "/flaky") && v.Image.Reference != ref {
					t.Errorf("%s: image volume %s of %s, want %s", name, v.Name, v.Image.Reference, ref)
				}
			}
			for _, cs := range pod.Status.ContainerStatuses {
				if strings.HasPrefix(cs.Name, "flaky-") && !strings.HasSuffix(cs.ImageID, b.results[0].Digest) {
					t.Errorf("%s: container %s runs image %s, want digest %s", name, cs.Name, cs.ImageID, b.results[0].Digest)
				}
			}
			if !slices.ContainsFunc(images, func(s string) bool { return strings.HasPrefix(s, "flaky-flaky ") }) ||
				!slices.ContainsFunc(images, func(s string) bool { return strings.HasPrefix(s, "flaky-steady ") }) {
				t.Errorf("%s: process containers of release flaky: %v", name, images)
			}
		}
	})
}

// timedStep runs step name as a subtest of t, unless t failed already (a
// step builds on the ones before), and logs how long it took.
func timedStep(t *testing.T, name string, f func(t *testing.T)) {
	if t.Failed() {
		return
	}
	start := time.Now()
	t.Run(name, f)
	t.Logf("%s: %s", name, time.Since(start).Round(100*time.Millisecond))
}

// buildFlaky builds release flaky's image from dir, a copy of its source,
// into the cluster's registry under releaseURL.
func buildFlaky(ctx context.Context, releaseURL, dir string) ([]releaseimage.Result, error) {
	work, err := os.MkdirTemp("", "verdicts-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)
	tarball, err := fixtures.SourceTarballFrom(work, "flaky", dir)
	if err != nil {
		return nil, err
	}
	return fixtures.BuiltTarballImages(ctx, walkthrough.BaseImage, releaseURL, tarball)
}

// copyRelease copies release src to dst with a change to its job's spec
// that changes no rendered file: a rebuild at the same version, whose
// image has a new digest.
func copyRelease(src, dst string) error {
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		return err
	}
	spec := filepath.Join(dst, "jobs", "flaky", "spec")
	data, err := os.ReadFile(spec)
	if err == nil {
		err = os.WriteFile(spec, append(data, "# rebuilt\n"...), 0o644)
	}
	return err
}

func getPod(t *testing.T, w *walkthrough.Walkthrough, ns, name string) *corev1.Pod {
	t.Helper()
	var pod corev1.Pod
	if err := w.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &pod); err != nil {
		t.Fatal(err)
	}
	return &pod
}

// running checks, when the deploy says Deployed, that every instance runs
// the accepted version: each pod Ready at the StatefulSet's update revision
// with every container ready, the StatefulSet at no partition.
func running(t *testing.T, w *walkthrough.Walkthrough, s *appsv1.StatefulSet, st status.Deploy) {
	t.Helper()
	var pods corev1.PodList
	if err := w.Client.List(context.Background(), &pods, client.InNamespace(s.Namespace), client.MatchingLabels(s.Spec.Selector.MatchLabels)); err != nil {
		t.Fatal(err)
	}
	if partition(s) != 0 || len(pods.Items) != int(ptr.Deref(s.Spec.Replicas, 1)) {
		t.Errorf("Deployed (%d of %d) with StatefulSet %s at partition %d, %d pods", st.Updated, st.Total, s.Name, partition(s), len(pods.Items))
	}
	for _, p := range pods.Items {
		notReady := slices.ContainsFunc(p.Status.ContainerStatuses, func(cs corev1.ContainerStatus) bool { return !cs.Ready })
		if !podReady(&p) || notReady || p.Labels[appsv1.ControllerRevisionHashLabelKey] != s.Status.UpdateRevision {
			data, _ := json.Marshal(p.Status)
			t.Errorf("Deployed while %s (revision %s, StatefulSet's %s) is not running: %s", p.Name, p.Labels[appsv1.ControllerRevisionHashLabelKey], s.Status.UpdateRevision, data)
		}
	}
}

func partition(s *appsv1.StatefulSet) int32 {
	if s.Spec.UpdateStrategy.RollingUpdate == nil {
		return 0
	}
	return ptr.Deref(s.Spec.UpdateStrategy.RollingUpdate.Partition, 0)
}

// held checks that after a failed canary (the highest ordinal) the
// partition holds the other instance: its pod of before, Ready, at the
// StatefulSet's previous revision.
func held(t *testing.T, w *walkthrough.Walkthrough, s *appsv1.StatefulSet, before *corev1.Pod) {
	t.Helper()
	var pod corev1.Pod
	if err := w.Client.Get(context.Background(), client.ObjectKeyFromObject(before), &pod); err != nil {
		t.Fatal(err)
	}
	if partition(s) != 1 || pod.UID != before.UID || !podReady(&pod) || pod.Labels[appsv1.ControllerRevisionHashLabelKey] == s.Status.UpdateRevision {
		t.Errorf("after the failed canary: partition %d; %s ready %v, replaced %v, revision %s (update revision %s)",
			partition(s), pod.Name, podReady(&pod), pod.UID != before.UID, pod.Labels[appsv1.ControllerRevisionHashLabelKey], s.Status.UpdateRevision)
	}
}

// failedEvent checks the manifest Secret's DeployFailed Event.
func failedEvent(t *testing.T, w *walkthrough.Walkthrough, ns, manifest string) {
	t.Helper()
	var events corev1.EventList
	if err := w.Client.List(context.Background(), &events, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(events.Items, func(e corev1.Event) bool {
		return e.InvolvedObject.Name == manifest && e.Reason == status.ReasonDeployFailed && strings.Contains(e.Message, "deploy stopped at instance group 'app'")
	}) {
		t.Errorf("no %s Event on %s", status.ReasonDeployFailed, manifest)
	}
}

// retryDeploy sets the manifest Secret's retry annotation to value.
func retryDeploy(t *testing.T, w *walkthrough.Walkthrough, ns, manifest, value string) {
	t.Helper()
	var s corev1.Secret
	if err := w.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: manifest}, &s); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(s.DeepCopy())
	if s.Annotations == nil {
		s.Annotations = map[string]string{}
	}
	s.Annotations[names.AnnotationRetryDeploy] = value
	if err := w.Client.Patch(context.Background(), &s, patch); err != nil {
		t.Fatal(err)
	}
	// The failed deploy's status stays until the controller takes the retry.
	for deadline := time.Now().Add(time.Minute); status.DeployOf(&s).Retry != value; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the retry was not taken after 1m: %+v", status.DeployOf(&s))
		}
		if err := w.Client.Get(context.Background(), client.ObjectKeyFromObject(&s), &s); err != nil {
			t.Fatal(err)
		}
	}
}
