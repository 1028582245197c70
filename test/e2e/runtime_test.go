package e2e_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/bosh-injector/bosh-injector/gather/model/bpm"
	"github.com/bosh-injector/bosh-injector/inject"
	"github.com/bosh-injector/bosh-injector/inject/runtime/contract"
	"github.com/bosh-injector/bosh-injector/inject/runtime/monit"
	"github.com/bosh-injector/bosh-injector/test/fixtures"
	"github.com/bosh-injector/bosh-injector/test/walkthrough"
)

// TestRuntime runs the process container inject makes for the lifecycle
// fixture job on the node: the lifecycle release's image built by
// release-image and pulled from the cluster's registry, the launcher from a
// freshly built bosh-injector, BPM's limits, user and capabilities, the BPM
// log files, post-start gating readiness (the kubelet's probe), and a
// deletion through the preStop hook (pre-stop, dynamic drain), the shutdown
// signal and post-stop within the grace period; and the fixture job without
// bpm.yml, run through its monit file's programs. The copy and render init
// containers are what the walkthrough test covers; here the job's files
// (plain, the fixture's templates use no ERB) are laid out on this machine
// and mounted where render would write them, so that the lifecycle's log
// outlives the pod.
func TestRuntime(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w, releaseURL, _ := startWalkthrough(t)
	c := w.Cluster
	work := t.TempDir()
	for _, d := range []string{filepath.Dir(work), work} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(work, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := walkthrough.BuildBinary(bin); err != nil {
		t.Fatal(err)
	}
	// The lifecycle release's image comes from the cluster's registry: its
	// lifecycled package is the fixture program.
	const ns = "default"

	run := func(t *testing.T, name string, failPostStart bool) (client.ObjectKey, string) {
		root := filepath.Join(work, name)
		jobs := filepath.Join(root, "jobs")
		layoutJob(t, jobs, "lifecycled")
		legacyMonit := layoutJob(t, jobs, "legacyd")
		bpmYAML, err := os.ReadFile(filepath.Join(jobs, "lifecycled", "config", "bpm.yml"))
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := bpm.Parse(bpmYAML, "lifecycled")
		if err != nil {
			t.Fatal(err)
		}
		if failPostStart {
			if err := os.WriteFile(filepath.Join(jobs, "lifecycled", "fail-post-start"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		info := &bpm.Info{Deployment: "lifecycle", InstanceGroup: "lifecycled", Instances: 1, Lifecycle: "service", ResolvedSecret: "unused",
			Releases: []bpm.Release{{Name: "lifecycle", Image: fixtures.Image(releaseURL, "lifecycle")}},
			Jobs: []bpm.Job{{Name: "lifecycled", Release: "lifecycle", Scripts: []string{"post-start", "pre-stop", "drain", "post-stop"}},
				{Name: "legacyd", Release: "lifecycle"}},
			BPM: []bpm.InstanceBPM{{Indexes: []int{0}, Jobs: map[string]bpm.Config{"lifecycled": cfg},
				Monit: map[string][]string{"legacyd": monit.Processes(legacyMonit)}}}}
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "lifecycled-" + name, Namespace: ns}}
		if err := inject.Mutate(pod, inject.Plan{Info: info, Instance: inject.Instance{Bootstrap: true}}); err != nil {
			t.Fatal(err)
		}
		// The job laid out here, and the instance's plan written from the
		// render container's environment, stand in for copy and render; an
		// init container marks the render step done for the pod's sandbox
		// as render does (contract.Boot: its namespaces).
		plan := filepath.Join(root, "plan")
		for _, c := range pod.Spec.InitContainers {
			for _, e := range c.Env {
				if e.Name == contract.EnvInstance {
					if err := contract.WriteInstance(plan, e.Value); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
		if err := os.Chmod(plan, 0o777); err != nil {
			t.Fatal(err)
		}
		pod.Spec.InitContainers = []corev1.Container{{Name: "render", Image: fixtures.Image(releaseURL, "lifecycle"),
			Command: []string{"/bin/sh", "-c", `boot="$(readlink /proc/self/ns/net) $(readlink /proc/self/ns/ipc)"; ` +
				`printf '%s' "$boot" > /plan/` + contract.Rendered + `.done; printf '%s' "$boot" > /plan/` + contract.Addressed + ".done"},
			VolumeMounts: []corev1.VolumeMount{{Name: "render-plan", MountPath: "/plan"}}}}
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: "render-plan", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: plan}}})
		hostVolume(t, pod, inject.VolumeJobs, jobs)
		hostVolume(t, pod, inject.VolumeSys, filepath.Join(root, "sys"))
		hostVolume(t, pod, contract.BinVolume, bin)
		hostVolume(t, pod, contract.PlanVolume, plan)
		hostVolume(t, pod, inject.VolumeResolved, "")
		if err := c.Client.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
		return client.ObjectKeyFromObject(pod), root
	}
	// waitReady polls the process container's readiness, as the kubelet's
	// probe reports it, until it is want; a probe's failure output is in
	// the pod's Unhealthy events.
	waitReady := func(t *testing.T, key client.ObjectKey, want bool, output string) {
		var ready bool
		var said []string
		err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 90*time.Second, true, func(context.Context) (bool, error) {
			var pod corev1.Pod
			if err := c.Client.Get(ctx, key, &pod); err != nil {
				return false, err
			}
			for _, s := range pod.Status.ContainerStatuses {
				if s.Name == "lifecycled-lifecycled" {
					ready = s.Ready && s.State.Running != nil
				}
			}
			var events corev1.EventList
			if err := c.Client.List(ctx, &events, client.InNamespace(ns)); err != nil {
				return false, err
			}
			said = said[:0]
			for _, e := range events.Items {
				if e.InvolvedObject.Name == key.Name && e.Reason == "Unhealthy" {
					said = append(said, e.Message)
				}
			}
			return ready == want && (output == "" || strings.Contains(strings.Join(said, "\n"), output)), nil
		})
		if err != nil {
			t.Fatalf("%v: ready=%v, want %v with %q; probe said:\n%s", err, ready, want, output, strings.Join(said, "\n"))
		}
	}

	t.Run("a failing post-start keeps the pod not ready, naming the job and its exit, never its output", func(t *testing.T) {
		key, _ := run(t, "failing", true)
		waitReady(t, key, false, "post-start of job 'lifecycled' failed: exit status 1")
	})

	t.Run("BPM's limits, user and capabilities, logs, the lifecycle in BOSH's order, a monit-only job", func(t *testing.T) {
		key, root := run(t, "serving", false)
		// Readiness follows post-start, not the process's first lines.
		waitReady(t, key, true, "")
		data, err := c.Clientset.CoreV1().Pods(ns).GetLogs(key.Name, &corev1.PodLogOptions{Container: "lifecycled-lifecycled"}).DoRaw(ctx)
		if err != nil {
			t.Fatal(err)
		}
		logs := string(data)
		stdoutLog, err := os.ReadFile(filepath.Join(root, "sys", "log", "lifecycled", "lifecycled.stdout.log"))
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{
			"==> uid 1000 gid 1000, open files 4096 <==",
			"==> CapAmb: 0000000000000400 <==", // NET_BIND_SERVICE, ambient
			"==> listening on :80 <==",
			"==> /var/vcap/jobs/lifecycled/config/bpm.yml <==",
		} {
			if !strings.Contains(logs, want) {
				t.Errorf("kubectl logs lack %q:\n%s", want, logs)
			}
			if !strings.Contains(string(stdoutLog), want) {
				t.Errorf("/var/vcap/sys/log/lifecycled/lifecycled.stdout.log lacks %q:\n%s", want, stdoutLog)
			}
		}

		// Deleted as a StatefulSet's scale-down deletes it: the kubelet
		// runs the preStop hook, then signals, within the grace period.
		if err := c.Client.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: ns}}); err != nil {
			t.Fatal(err)
		}
		if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
			err := c.Client.Get(ctx, key, &corev1.Pod{})
			return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
		}); err != nil {
			t.Fatalf("the pod did not go: %v", err)
		}
		lifecycle, err := os.ReadFile(filepath.Join(root, "sys", "log", "lifecycled", "lifecycle.log"))
		if err != nil {
			t.Fatal(err)
		}
		want := `post-start
pre-stop vm=delete instance=keep deployment=keep
drain job_shutdown hash_unchanged
drain job_check_status hash_unchanged
drain job_check_status hash_unchanged
process stopped by signal
post-stop
`
		if string(lifecycle) != want {
			t.Errorf("lifecycle.log:\n%s\nwant:\n%s", lifecycle, want)
		}
		// The job without bpm.yml ran and stopped through its monit file.
		legacy, err := os.ReadFile(filepath.Join(root, "sys", "log", "legacyd", "legacyd.log"))
		if err != nil {
			t.Fatal(err)
		}
		if !regexp.MustCompile(`(?s)^start program\n.*==> /var/vcap/jobs/legacyd/monit <==.*stop program\n.*==> stopping on terminated <==`).Match(legacy) {
			t.Errorf("legacyd.log:\n%s", legacy)
		}
	})
}

// layoutJob writes a fixture job's templates (which use no ERB) and monit
// file where render would write them, and returns the monit file.
func layoutJob(t *testing.T, jobs, job string) string {
	t.Helper()
	src := filepath.Join(fixtures.ReleaseDir("lifecycle"), "jobs", job)
	data, err := os.ReadFile(filepath.Join(src, "spec"))
	if err != nil {
		t.Fatal(err)
	}
	var spec struct {
		Templates map[string]string `json:"templates"`
	}
	if err := yaml.Unmarshal(data, &spec); err != nil {
		t.Fatal(err)
	}
	for from, to := range spec.Templates {
		body, err := os.ReadFile(filepath.Join(src, "templates", from))
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(jobs, job, to)
		mode := os.FileMode(0o644)
		if strings.HasPrefix(to, "bin/") {
			mode = 0o755
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, body, mode); err != nil {
			t.Fatal(err)
		}
	}
	monitFile, err := os.ReadFile(filepath.Join(src, "monit"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(jobs, job, "monit"), monitFile, 0o644); err != nil {
		t.Fatal(err)
	}
	return string(monitFile)
}

// hostVolume replaces a pod volume by host directories under dir, one per
// mount (subPaths included); with dir empty it drops the volume and its
// mounts.
func hostVolume(t *testing.T, pod *corev1.Pod, volume, dir string) {
	t.Helper()
	var volumes []corev1.Volume
	for _, v := range pod.Spec.Volumes {
		if v.Name != volume {
			volumes = append(volumes, v)
		}
	}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		var mounts []corev1.VolumeMount
		for _, m := range c.VolumeMounts {
			if m.Name != volume {
				mounts = append(mounts, m)
				continue
			}
			if dir == "" {
				continue
			}
			host := filepath.Join(dir, m.SubPath)
			if err := os.MkdirAll(host, 0o777); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(host, 0o777); err != nil {
				t.Fatal(err)
			}
			name := fmt.Sprintf("%s-%d", volume, len(volumes))
			volumes = append(volumes, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: host}}})
			m.Name, m.SubPath = name, ""
			mounts = append(mounts, m)
		}
		c.VolumeMounts = mounts
	}
	pod.Spec.Volumes = volumes
}
