package e2e_test

import (
	"context"
	"fmt"
	"os"
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
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bosh-injector/bosh-injector/gather/names"
	"github.com/bosh-injector/bosh-injector/gather/operator/status"
	"github.com/bosh-injector/bosh-injector/inject"
	"github.com/bosh-injector/bosh-injector/test/fixtures"
	"github.com/bosh-injector/bosh-injector/test/walkthrough"
)

// startSamples is how many pods of each kind BenchmarkPodStart starts; it
// prints the median (the kubelet notices a container running at its next
// relist, every second, which makes single samples jump).
const startSamples = 5

// preStartSleep is how long every job's pre-start script takes: a VM waits
// for the slowest, as the agent runs them at once.
const preStartSleep = time.Second

// BenchmarkPodStart prints what injection costs at pod start on the node:
// the time from the StatefulSet's creation to its pod being Ready, for a
// plain pod of the release image and for injected instances of a 1-job and
// a 10-job instance group (each job one BPM process and a pre-start script
// taking preStartSleep), with the release jobs copied and mounted as image
// volumes (the pod annotation choosing), with the moment each init container
// ended and the containers ran, as the kubelet reported them; and, as the
// kubelet's floor for the 10-job pod's 12 containers (render, pre-start,
// 10 processes), a plain pod of as many containers.
func BenchmarkPodStart(b *testing.B) {
	ctx := context.Background()
	w, _, _ := startWalkthrough(b)
	releaseURL := w.Registry() + "/bosh-injector-bench"
	dir := b.TempDir()
	tarball, err := fixtures.SourceTarballFrom(dir, "starter", starterRelease(b, dir, 10))
	if err != nil {
		b.Fatal(err)
	}
	if err := fixtures.BuildTarballImages(ctx, walkthrough.BaseImage, releaseURL, tarball); err != nil {
		b.Fatal(err)
	}
	const ns = "starter"
	gst, err := w.Deploy(ctx, ns, func(ctx context.Context, c client.Client, ns string) (*corev1.Secret, error) {
		return fixtures.Apply(ctx, c, ns, "starter", "starter-manifest", []byte(starterManifest(releaseURL, 10)))
	})
	if err != nil || gst.State != status.ReasonGathered {
		b.Fatalf("gathering: %v %+v", err, gst)
	}
	image := fixtures.Image(releaseURL, "starter")
	kinds := []struct {
		name, group string
		jobs        inject.ReleaseJobs
		// processes is how many process containers the pod runs.
		processes int
	}{{"plain pod of the release image", "", "", 1}, {"plain pod of 12 containers", "", "", 12},
		{"1-job group, copied", "one", inject.ReleaseJobsCopy, 1}, {"1-job group, image volume", "one", inject.ReleaseJobsImage, 1},
		{"10-job group, copied", "ten", inject.ReleaseJobsCopy, 10}, {"10-job group, image volume", "ten", inject.ReleaseJobsImage, 10}}
	for range b.N {
		samples := make([][]podStart, len(kinds))
		// Interleaved, so that a slower moment of the machine weighs on
		// every kind alike.
		for i := range startSamples {
			for k, kind := range kinds {
				s, err := startPod(ctx, w.Client, ns, fmt.Sprintf("s%d-%d", k, i), kind.group, kind.jobs, image, kind.processes)
				if err != nil {
					b.Fatal(err)
				}
				if s.processes < kind.processes {
					b.Fatalf("%s: %d containers ran, want %d processes: %s", kind.name, s.processes, kind.processes, s.inits)
				}
				samples[k] = append(samples[k], s)
			}
		}
		b.Logf("pod start on the node, StatefulSet created → pod Ready, the median of %d; the groups' jobs are of one release (one image), each one BPM process and a pre-start taking %s (init containers: when each ended; containers: when the kubelet reported them running)", startSamples, preStartSleep)
		plain := median(samples[0]).ready
		for k, kind := range kinds {
			m := median(samples[k])
			b.Logf("  %-32s %6.2fs  %5.1f× plain  +%5.2fs  %s", kind.name, m.ready.Seconds(), m.ready.Seconds()/plain.Seconds(), (m.ready - plain).Seconds(), m.inits)
			b.ReportMetric(m.ready.Seconds(), strings.NewReplacer(" ", "", ",", "-", "group", "").Replace(kind.name)+"-ready-s")
		}
	}
}

// podStart is one pod's start: when it was Ready, and when each init
// container ended, after the StatefulSet's creation.
type podStart struct {
	ready time.Duration
	inits string
	// processes is how many containers ran.
	processes int
}

func median(s []podStart) podStart {
	s = slices.Clone(s)
	slices.SortFunc(s, func(a, b podStart) int { return int(a.ready - b.ready) })
	return s[len(s)/2]
}

// startPod creates a StatefulSet of one pod, of instance group group of
// deployment starter (no group: a plain pod of plain containers sleeping in
// image), polls its pod until Ready and deletes it again.
func startPod(ctx context.Context, c client.Client, ns, name, group string, jobs inject.ReleaseJobs, image string, plain int) (podStart, error) {
	labels := map[string]string{"bench": name}
	var containers []corev1.Container
	for i := range plain {
		containers = append(containers, corev1.Container{Name: fmt.Sprintf("main-%d", i+1), Image: image, Command: []string{"sleep", "infinity"}})
	}
	var annotations map[string]string
	if group != "" {
		labels = map[string]string{names.LabelDeployment: "starter", names.LabelInstanceGroup: group, names.LabelAZIndex: "1"}
		containers = []corev1.Container{{Name: "job1-job1", Image: image}}
		annotations = map[string]string{names.AnnotationReleaseJobs: string(jobs)}
	}
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: annotations},
				Spec: corev1.PodSpec{TerminationGracePeriodSeconds: ptr.To[int64](1), Containers: containers}}}}
	began := time.Now()
	if err := c.Create(ctx, sts); err != nil {
		return podStart{}, err
	}
	defer func() {
		if group != "" {
			// The deploy watches the instance it released for its watch
			// time: a StatefulSet deleted meanwhile fails the deploy, which
			// then holds the next pods of its groups.
			_ = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
				var s corev1.Secret
				if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "starter-manifest"}, &s); err != nil {
					return false, nil
				}
				st, current := status.CurrentDeploy(&s)
				return current && st.Phase != status.PhaseDeploying, nil
			})
		}
		_ = c.Delete(ctx, sts, client.PropagationPolicy(metav1.DeletePropagationForeground))
		_ = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			// The StatefulSet too: two of one group and AZ at once are more
			// replicas than the manifest's instances, a scale-down.
			return apierrors.IsNotFound(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-0"}, &corev1.Pod{})) &&
				apierrors.IsNotFound(c.Get(ctx, client.ObjectKeyFromObject(sts), &appsv1.StatefulSet{})), nil
		})
	}()
	var s podStart
	ended := map[string]bool{}
	var inits []string
	// When the kubelet reported each container running: it starts them
	// one after another.
	running := map[string]bool{}
	var firstRunning, lastRunning time.Duration
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		var pod corev1.Pod
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-0"}, &pod); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		for _, st := range pod.Status.InitContainerStatuses {
			if t := st.State.Terminated; t != nil && !ended[st.Name] {
				if t.ExitCode != 0 {
					return false, fmt.Errorf("init container %s of %s exited %d: %s", st.Name, pod.Name, t.ExitCode, t.Message)
				}
				ended[st.Name] = true
				inits = append(inits, fmt.Sprintf("%s %.2fs", st.Name, time.Since(began).Seconds()))
			}
		}
		for _, st := range pod.Status.ContainerStatuses {
			for _, t := range []*corev1.ContainerStateTerminated{st.State.Terminated, st.LastTerminationState.Terminated} {
				if t != nil && t.ExitCode != 0 {
					return false, fmt.Errorf("container %s of %s exited %d: %s", st.Name, pod.Name, t.ExitCode, t.Message)
				}
			}
			if st.State.Running != nil && !running[st.Name] {
				running[st.Name] = true
				if len(running) == 1 {
					firstRunning = time.Since(began)
				}
				lastRunning = time.Since(began)
			}
		}
		for _, cond := range pod.Status.Conditions {
			if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
				s.ready = time.Since(began)
				return true, nil
			}
		}
		return false, nil
	})
	inits = append(inits, fmt.Sprintf("%d containers running %.2f–%.2fs", len(running), firstRunning.Seconds(), lastRunning.Seconds()))
	s.inits = strings.Join(inits, ", ")
	s.processes = len(running)
	return s, err
}

// starterRelease writes release starter with jobs job1…jobN into dir and
// returns its directory: each job one BPM process sleeping, and a
// pre-start script.
func starterRelease(b *testing.B, dir string, jobs int) string {
	rel := filepath.Join(dir, "starter-release")
	for i := 1; i <= jobs; i++ {
		job := "job" + strconv.Itoa(i)
		files := map[string]string{
			"spec": fmt.Sprintf("---\nname: %s\ntemplates:\n  bpm.yml.erb: config/bpm.yml\n  pre-start.erb: bin/pre-start\npackages: []\nproperties: {}\n", job),
			// BPM's processes run under monit: an empty monit file would
			// make the job idle (no process), as on a VM.
			"monit":                   fmt.Sprintf("check process %[1]s\n  with pidfile /var/vcap/sys/run/bpm/%[1]s/%[1]s.pid\n  start program \"/var/vcap/jobs/bpm/bin/bpm start %[1]s\"\n  stop program \"/var/vcap/jobs/bpm/bin/bpm stop %[1]s\"\n  group vcap\n", job),
			"templates/bpm.yml.erb":   fmt.Sprintf("processes:\n- name: %s\n  executable: /bin/sleep\n  args: [infinity]\n", job),
			"templates/pre-start.erb": fmt.Sprintf("#!/bin/sh\necho pre-start of <%%= name %%>\nsleep %g\n", preStartSleep.Seconds()),
		}
		for path, body := range files {
			p := filepath.Join(rel, "jobs", job, path)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				b.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	return rel
}

// starterManifest is deployment starter: group one with job1, group ten
// with job1…jobN.
func starterManifest(releaseURL string, jobs int) string {
	var ten strings.Builder
	for i := 1; i <= jobs; i++ {
		fmt.Fprintf(&ten, "  - {name: job%d, release: starter}\n", i)
	}
	return fmt.Sprintf(`name: starter
releases:
- {name: starter, version: %q, url: %s}
stemcells:
- {alias: default, os: %s, version: %q}
update: {canaries: 1, max_in_flight: 1, canary_watch_time: 1000-30000, update_watch_time: 1000-30000}
instance_groups:
- name: one
  azs: [z1]
  instances: 1
  networks: [{name: default}]
  jobs:
  - {name: job1, release: starter}
- name: ten
  azs: [z1]
  instances: 1
  networks: [{name: default}]
  jobs:
%s`, fixtures.Version, releaseURL, fixtures.StemcellOS, fixtures.StemcellVersion, ten.String())
}
