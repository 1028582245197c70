package e2e_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bosh-injector/bosh-injector/cmd/bosh-injector/app"
	"github.com/bosh-injector/bosh-injector/gather/client/errand"
	"github.com/bosh-injector/bosh-injector/gather/gathering/objects"
	"github.com/bosh-injector/bosh-injector/gather/model/deployment"
	"github.com/bosh-injector/bosh-injector/gather/names"
	"github.com/bosh-injector/bosh-injector/gather/operator/status"
	"github.com/bosh-injector/bosh-injector/inject"
	"github.com/bosh-injector/bosh-injector/test/fixtures"
	"github.com/bosh-injector/bosh-injector/test/walkthrough"
)

// TestRunErrand runs the shop deployment's smoke-tests errand with
// `bosh-injector run-errand` (the command's own code, in process, with the
// cluster's kubeconfig) from the suspended template Job `objects` prints:
// twice in a row, then skipped with --when-changed, then web-check, a job
// colocated on web, in web/0's pod, and storefront, which has no bin/run,
// then smoke-tests failing after a change that makes it exit 3.
func TestRunErrand(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w, releaseURL, _ := startWalkthrough(t)
	// The shop deployment in a namespace of its own: TestWalkthrough
	// changes the one in shop meanwhile.
	const ns = "errands"
	if _, err := w.Deploy(ctx, ns, fixtures.Shop(releaseURL)); err != nil {
		t.Fatal(err)
	}
	var manifest corev1.Secret
	if err := w.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: fixtures.ManifestSecret}, &manifest); err != nil {
		t.Fatal(err)
	}

	// The errand's Job as `objects` prints it: applying it runs nothing.
	res, err := objects.Build(manifest.Data[names.ManifestKey], deployment.OpsFilesOf(manifest.Data), objects.Options{Namespace: ns,
		// The one node has no zone: its AZs are the scheduler's to place.
		Placement: objects.Placement{NoZoneAffinity: true}})
	if err != nil {
		t.Fatal(err)
	}
	var tmpl *batchv1.Job
	for _, o := range res.Objects {
		if j, ok := o.(*batchv1.Job); ok && j.Spec.Template.Labels[names.LabelInstanceGroup] == "smoke-tests" {
			tmpl = j
		}
	}
	if tmpl == nil {
		t.Fatal("objects printed no smoke-tests Job")
	}
	if err := w.Client.Create(ctx, tmpl); err != nil {
		t.Fatal(err)
	}

	runErrand := func(args ...string) (int, string) {
		t.Helper()
		var out bytes.Buffer
		start := time.Now()
		code := app.Main(append([]string{"run-errand", "shop", "smoke-tests", "--namespace", ns, "--kubeconfig", w.Kubeconfig}, args...), &out, &out)
		t.Logf("run-errand %s: exit %d in %s\n%s", strings.Join(args, " "), code, time.Since(start).Round(100*time.Millisecond), out.String())
		return code, out.String()
	}
	printed := "==> /var/vcap/jobs/smoke-tests/config/config.json <=="
	for run := 1; run <= 2; run++ {
		code, out := runErrand()
		if code != 0 || !strings.Contains(out, printed) || !strings.Contains(out, "Errand 'smoke-tests' completed successfully") ||
			!strings.Contains(out, fmt.Sprintf("Job %s-%d", tmpl.Name, run)) {
			t.Fatalf("run %d: exit %d, want 0 with the errand's output:\n%s", run, code, out)
		}
	}
	if code, out := runErrand("--when-changed"); code != 0 || !strings.Contains(out, "Errand 'smoke-tests' skipped: no changes since its last successful run") {
		t.Errorf("--when-changed after a successful run: exit %d:\n%s", code, out)
	}

	// A job of a service group named as the errand: web-check, colocated
	// on web, whose monit checks no process, runs nowhere until run-errand
	// execs its bin/run in the web instance's pod (started here when
	// TestWalkthrough did not), in the errand container holding the job,
	// as the agent runs it.
	web := webInstance(ctx, t, w, ns, releaseURL)
	for _, c := range web.Spec.Containers {
		if strings.HasPrefix(c.Name, "web-check") && c.Name != inject.ErrandContainer("web-check") {
			t.Errorf("pod %s runs container %s of errand job web-check", web.Name, c.Name)
		}
	}
	var colocated bytes.Buffer
	start := time.Now()
	code := app.Main([]string{"run-errand", "shop", "web-check", "--instance", "web/0", "--namespace", ns, "--kubeconfig", w.Kubeconfig}, &colocated, &colocated)
	t.Logf("run-errand web-check --instance web/0: exit %d in %s\n%s", code, time.Since(start).Round(100*time.Millisecond), colocated.String())
	for _, want := range []string{
		"web-check on web/0: PATH=/usr/sbin:/usr/bin:/sbin:/bin args=0",
		"==> /var/vcap/jobs/web-check/config/bpm.yml <==",
		"==> uid 0 gid 0",
		"Instance   web/0",
		"Errand 'web-check' completed successfully",
	} {
		if code != 0 || !strings.Contains(colocated.String(), want) {
			t.Errorf("colocated errand web-check: exit %d, want 0 with %q:\n%s", code, want, colocated.String())
			break
		}
	}

	// storefront has no bin/run: run in its process container, it fails
	// with the launcher's message.
	var noRun bytes.Buffer
	code = app.Main([]string{"run-errand", "shop", "storefront", "--instance", "web/0", "--namespace", ns, "--kubeconfig", w.Kubeconfig}, &noRun, &noRun)
	t.Logf("run-errand storefront --instance web/0: exit %d\n%s", code, noRun.String())
	if code == 0 || !strings.Contains(noRun.String(), "errand storefront:") || !strings.Contains(noRun.String(), "Instance   web/0") || !strings.Contains(noRun.String(), "Errand 'storefront' completed with error") {
		t.Errorf("colocated errand without bin/run: exit %d:\n%s", code, noRun.String())
	}

	gst, err := w.Deploy(ctx, ns, fixtures.Shop(releaseURL, "failing-smoke-tests.yml"))
	if err != nil || gst.State != status.ReasonGathered {
		t.Fatalf("gathering: %+v %v", gst, err)
	}
	code, out := runErrand("--when-changed")
	if code != 3 || !strings.Contains(out, printed) || !strings.Contains(out, "==> exiting 3 <==") || !strings.Contains(out, "Errand 'smoke-tests' completed with error (exit code 3)") {
		t.Errorf("failing errand: exit %d, want 3 with its output:\n%s", code, out)
	}

	// Each run's Job went when it ended; the template stays, suspended.
	var jobs batchv1.JobList
	if err := w.Client.List(ctx, &jobs, client.InNamespace(ns), client.MatchingLabels{errand.LabelTemplate: tmpl.Name}); err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs.Items {
		if j.DeletionTimestamp == nil {
			t.Errorf("run Job %s was kept", j.Name)
		}
	}
	if err := w.Client.Get(ctx, client.ObjectKeyFromObject(tmpl), tmpl); err != nil {
		t.Fatal(err)
	}
	if !ptr.Deref(tmpl.Spec.Suspend, false) || tmpl.Annotations[errand.AnnotationRuns] != "3" {
		t.Errorf("template after three runs: suspend %v, annotations %v", tmpl.Spec.Suspend, tmpl.Annotations)
	}
}

// webInstance is shop's web/0 pod, running its web-check container:
// TestWalkthrough's, else one started here.
func webInstance(ctx context.Context, t *testing.T, w *walkthrough.Walkthrough, ns, releaseURL string) *corev1.Pod {
	t.Helper()
	var pod corev1.Pod
	key := client.ObjectKey{Namespace: ns, Name: "web-z1-0"}
	err := w.Client.Get(ctx, key, &pod)
	if apierrors.IsNotFound(err) {
		run, serr := w.StartInstance(ctx, ns, walkthrough.Instance{Group: "web", AZIndex: 1, Container: "storefront-storefront", Image: fixtures.Image(releaseURL, "shop")})
		if serr != nil {
			t.Fatal(serr)
		}
		if logs, werr := run.WaitForLog(ctx, "storefront-storefront", "listen_port:", 2*time.Minute); werr != nil {
			t.Fatalf("%v\n%s", werr, logs)
		}
		err = w.Client.Get(ctx, key, &pod)
	}
	// A rollout may be replacing it.
	for deadline := time.Now().Add(2 * time.Minute); err == nil && errand.JobContainer(&pod, "web-check") == "" && time.Now().Before(deadline); {
		time.Sleep(time.Second)
		err = w.Client.Get(ctx, key, &pod)
	}
	if err != nil {
		t.Fatal(err)
	}
	if errand.JobContainer(&pod, "web-check") == "" {
		t.Fatalf("pod %s (%s) runs no container of job web-check: %+v", pod.Name, pod.Status.Phase, pod.Status.ContainerStatuses)
	}
	return &pod
}
