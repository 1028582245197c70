package errand

import (
	"bytes"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/bosh-injector/bosh-injector/gather/client/instances"
	"github.com/bosh-injector/bosh-injector/gather/model/instance"
	"github.com/bosh-injector/bosh-injector/gather/model/manifest"
	"github.com/bosh-injector/bosh-injector/gather/names"
	"github.com/bosh-injector/bosh-injector/inject"
)

const deploymentYAML = `name: d
instance_groups:
- {name: web, instances: 3, jobs: [{name: server, release: r}, {name: check, release: r}]}
- {name: api, instances: 1, jobs: [{name: server, release: r}, {name: check, release: r}]}
- {name: migrate, instances: 2, lifecycle: errand, jobs: [{name: migrations, release: r}]}
- {name: smoke-tests, instances: 1, lifecycle: errand, jobs: [{name: smoke-tests, release: r}]}
- {name: none, instances: 0, lifecycle: errand, jobs: [{name: nothing, release: r}]}
- {name: server, instances: 1, lifecycle: errand, jobs: [{name: server-check, release: r}]}
`

func filters(t *testing.T, args ...string) []instances.Filter {
	var out []instances.Filter
	for _, a := range args {
		f, err := instances.ParseFilter(a)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, f)
	}
	return out
}

func TestResolveAsTheDirector(t *testing.T) {
	m, err := manifest.Parse([]byte(deploymentYAML))
	if err != nil {
		t.Fatal(err)
	}
	id := func(g string, i int) string { return instance.ID("d", g, i) }
	for _, c := range []struct {
		name, errand string
		filters      []string
		lifecycle    string
		colocated    []string
		warnings     int
		err          string
	}{
		// An errand group runs its first instance only.
		{name: "errand group", errand: "migrate", lifecycle: "migrate/0"},
		// Named after its only job: both readings run it, no warning.
		{name: "group and job of one name", errand: "smoke-tests", lifecycle: "smoke-tests/0"},
		{name: "colocated job on every instance", errand: "check", colocated: []string{"web/0", "web/1", "web/2", "api/0"}, warnings: 1},
		// The job wins over another group of its name (ambiguous), and runs
		// on several instances at once: the director's two warnings.
		{name: "job and another group of one name", errand: "server", colocated: []string{"web/0", "web/1", "web/2", "api/0"}, warnings: 2},
		{name: "colocated, filtered by group and index", errand: "check", filters: []string{"web/1", "api"}, colocated: []string{"web/1", "api/0"}},
		{name: "colocated, filtered by id", errand: "check", filters: []string{"web/" + id("web", 2)}, colocated: []string{"web/2"}},
		{name: "no such errand", errand: "nope", err: "Errand 'nope' doesn't exist"},
		{name: "a service group", errand: "web", err: "Instance group 'web' is not an errand. To mark an instance group as an errand set its lifecycle to 'errand' in the deployment manifest."},
		{name: "no instances", errand: "none", err: "Instance 'd/none/0' doesn't exist"},
		{name: "filter on a group errand", errand: "migrate", filters: []string{"migrate/0"}, err: "Filtering by instances is not supported when running errand by instance group name"},
		{name: "unmatched filter", errand: "check", filters: []string{"web/7", "api"}, err: "No instances match selection criteria: [web/7]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := Resolve(m, c.errand, filters(t, c.filters...))
			if c.err != "" {
				if err == nil || err.Error() != c.err {
					t.Fatalf("error %v, want %s", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if l := got.Lifecycle; (l == nil) != (c.lifecycle == "") || l != nil && l.String() != c.lifecycle {
				t.Errorf("lifecycle %v, want %q", l, c.lifecycle)
			}
			var colocated []string
			for _, in := range got.Colocated {
				colocated = append(colocated, in.String())
			}
			if strings.Join(colocated, " ") != strings.Join(c.colocated, " ") {
				t.Errorf("colocated %v, want %v", colocated, c.colocated)
			}
			if len(got.Warnings) != c.warnings {
				t.Errorf("warnings %q, want %d", got.Warnings, c.warnings)
			}
		})
	}
}

func TestRunJobIsTheTemplateUnsuspendedOnItsFirstInstance(t *testing.T) {
	tmpl := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "shop-smoke-tests-z1", Namespace: "shop", Labels: map[string]string{"team": "a"},
			Annotations: map[string]string{AnnotationRuns: "4"}},
		Spec: batchv1.JobSpec{
			Suspend: ptr.To(true), Completions: ptr.To(int32(2)), Parallelism: ptr.To(int32(2)),
			CompletionMode: ptr.To(batchv1.IndexedCompletion), BackoffLimit: ptr.To(int32(0)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{batchv1.ControllerUidLabel: "u"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{
				names.LabelDeployment: "shop", batchv1.ControllerUidLabel: "u", batchv1.JobNameLabel: "shop-smoke-tests-z1", "controller-uid": "u", "job-name": "x",
			}}},
		},
	}
	run := RunJob(tmpl, 5, 3)
	if run.Name != "shop-smoke-tests-z1-5" || run.Namespace != "shop" || run.Labels[LabelTemplate] != tmpl.Name || run.Labels["team"] != "a" {
		t.Errorf("run %s/%s labels %v", run.Namespace, run.Name, run.Labels)
	}
	s := run.Spec
	if s.Suspend != nil || s.Selector != nil || *s.Completions != 1 || *s.Parallelism != 1 || *s.BackoffLimit != 0 || *s.CompletionMode != batchv1.IndexedCompletion {
		t.Errorf("spec %+v", s)
	}
	if len(s.Template.Labels) != 1 || s.Template.Annotations[names.AnnotationResolvedVersion] != "3" {
		t.Errorf("pod template %+v", s.Template.ObjectMeta)
	}
	if !ptr.Deref(tmpl.Spec.Suspend, false) || len(tmpl.Spec.Template.Labels) != 5 || tmpl.Spec.Template.Annotations != nil {
		t.Errorf("the template changed: %+v", tmpl.Spec)
	}
}

func TestStateFollowsVersionAndTemplate(t *testing.T) {
	tmpl := corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "r:1"}}}}
	a, _ := State(3, tmpl)
	b, _ := State(4, tmpl)
	tmpl.Spec.Containers[0].Image = "r:2"
	c, _ := State(3, tmpl)
	if a == b || a == c {
		t.Errorf("states %q %q %q", a, b, c)
	}
}

func TestJobContainerRunsAndMountsTheJob(t *testing.T) {
	mount := func(path string) []corev1.VolumeMount {
		return []corev1.VolumeMount{{Name: "bosh-jobs", MountPath: path}}
	}
	pod := &corev1.Pod{
		Spec: corev1.PodSpec{Containers: []corev1.Container{
			{Name: "server-server", VolumeMounts: mount("/var/vcap/jobs/server")},
			{Name: "check-run", VolumeMounts: mount("/var/vcap/jobs/check")},
			// An errand job whose scripts a process container hosts: its
			// errand container, which runs nothing else, runs it.
			{Name: "host-host", VolumeMounts: append(mount("/var/vcap/jobs/host"), mount("/var/vcap/jobs/smoke")...)},
			{Name: inject.ErrandContainer("smoke"), VolumeMounts: mount("/var/vcap/jobs/smoke")},
		}},
		Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{
			{Name: "server-server", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}},
			{Name: "check-run", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}},
			{Name: "host-host", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}},
			{Name: "smoke-errand", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}},
		}},
	}
	if got := JobContainer(pod, "smoke"); got != "smoke-errand" {
		t.Errorf("smoke: %q", got)
	}
	if got := JobContainer(pod, "server"); got != "server-server" {
		t.Errorf("server: %q", got)
	}
	if got := JobContainer(pod, "check"); got != "" {
		t.Errorf("check runs in %q, which is not running", got)
	}
}

func TestSummarizeAsBoshCLI(t *testing.T) {
	var out bytes.Buffer
	code := summarize(&out, "check", []result{{Instance: instances.Instance{Group: "web", Index: 0, ID: "a"}}, {Instance: instances.Instance{Group: "web", Index: 1, ID: "b"}, Exit: 3}})
	if code != 3 || !strings.Contains(out.String(), "Errand 'check' completed with error (exit code 3)") || !strings.Contains(out.String(), "Instance   web/1 (b)\nExit Code  3") {
		t.Errorf("exit %d:\n%s", code, out.String())
	}
	out.Reset()
	if code := summarize(&out, "check", []result{{Skipped: true}}); code != 0 || out.String() != "Errand 'check' skipped: no changes since its last successful run\n" {
		t.Errorf("exit %d:\n%s", code, out.String())
	}
}
