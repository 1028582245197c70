package sandbox

import (
	"bytes"
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/bosh-injector/bosh-injector/gather/names"
	"github.com/bosh-injector/bosh-injector/gather/operator/status"
	"github.com/bosh-injector/bosh-injector/inject/runtime/contract"
)

// TestReportPreStartFailed: a pod whose templates rendered and whose
// pre-start failed is reported so, not as "not rendered"; one whose render
// failed is "not rendered".
func TestReportPreStartFailed(t *testing.T) {
	exited := func(name string, code int32, msg string) corev1.ContainerStatus {
		return corev1.ContainerStatus{Name: name, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Message: msg}}}
	}
	pod := func(statuses ...corev1.ContainerStatus) *corev1.Pod {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "cf-router-z1-0", Annotations: map[string]string{names.AnnotationInjected: "true"},
				Labels: map[string]string{names.LabelInstanceGroup: "router", names.LabelInstanceIndex: "0"}},
			Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
				InitContainers: []corev1.Container{{Name: "render"}, {Name: "pre-start"}},
				Containers:     []corev1.Container{{Name: "gorouter-gorouter"}}},
		}
		p.Status.InitContainerStatuses = statuses
		return p
	}
	s := &Sandbox{}
	for _, c := range []struct {
		pod  *corev1.Pod
		want []string
	}{
		{pod(exited("render", 0, ""), exited("pre-start", 1, "unable to set CAP_SETFCAP")),
			[]string{"router/0 pod cf-router-z1-0: injected; rendered; pre-start failed", "FAILED: pre-start pre-start exited 1:", "unable to set CAP_SETFCAP"}},
		{pod(exited("render", 1, "Error filling in template")),
			[]string{"router/0 pod cf-router-z1-0: injected; not rendered", "FAILED: init container render exited 1"}},
		{pod(exited("render", 0, "")),
			[]string{"router/0 pod cf-router-z1-0: injected; rendered; still starting"}},
	} {
		var r instanceReport
		s.describe(context.Background(), c.pod, &r, false)
		var out bytes.Buffer
		printReport(&out, []instanceReport{r})
		for _, w := range c.want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("report lacks %q:\n%s", w, out.String())
			}
		}
	}
}

// TestReportRestartedInPlace: a process its launcher starts again in its
// container, as monit does, is reported from the launchers' status with its
// exit and stderr, settled once started again settledRestarts times; one
// that came up after restarts is running.
func TestReportRestartedInPlace(t *testing.T) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "nats-0", Annotations: map[string]string{names.AnnotationInjected: "true"},
			Labels: map[string]string{names.LabelInstanceGroup: "nats", names.LabelInstanceIndex: "0"}},
		Spec: corev1.PodSpec{InitContainers: []corev1.Container{{Name: "render"}},
			Containers: []corev1.Container{{Name: "nats-tls-nats-tls"}, {Name: "nats-tls-healthcheck"}}},
	}
	running := func(name string, ready bool) corev1.ContainerStatus {
		return corev1.ContainerStatus{Name: name, Ready: ready, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}
	}
	pod.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "render", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{}}}}
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{running("nats-tls-nats-tls", true), running("nats-tls-healthcheck", false)}
	gst := func(state string, restarts int, exit *contract.Exit) *contract.Status {
		return &contract.Status{Setup: true, Processes: []contract.ProcessStatus{{Container: "nats-tls-nats-tls", State: contract.StateRunning},
			{Container: "nats-tls-healthcheck", State: state, Restarts: restarts, LastExit: exit}}}
	}
	refused := &contract.Exit{Code: 1, Tail: "dial tcp 127.0.0.1:4224: connect: connection refused"}
	for _, c := range []struct {
		st      *contract.Status
		settled bool
		want    []string
	}{
		{gst(contract.StateFailing, 3, refused), true, []string{"nats/0 pod nats-0: injected; rendered; running: nats-tls-nats-tls\n",
			"FAILED: process nats-tls-healthcheck exited 1 (started again in its container 3 times, as monit does):\n", "        dial tcp 127.0.0.1:4224: connect: connection refused"}},
		{gst(contract.StateFailing, 1, &contract.Exit{Code: 137, Signal: "SIGKILL"}), false,
			[]string{"FAILED: process nats-tls-healthcheck exited 137 (killed by SIGKILL; started again in its container 1 times, as monit does)"}},
		{gst(contract.StateStarting, 2, refused), false, []string{"running: nats-tls-nats-tls, nats-tls-healthcheck; still starting"}},
	} {
		s := &Sandbox{launchers: func(context.Context, *corev1.Pod) (*contract.Status, error) { return c.st, nil }}
		var r instanceReport
		s.describe(context.Background(), pod, &r, false)
		var out bytes.Buffer
		printReport(&out, []instanceReport{r})
		if r.Settled != c.settled {
			t.Errorf("settled %v, want %v:\n%s", r.Settled, c.settled, out.String())
		}
		for _, w := range c.want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("report lacks %q:\n%s", w, out.String())
			}
		}
	}
}

// TestReportHeldAfterAFailedDeploy: an instance the deploy's gate holds is
// settled, not started, once the deploy failed; still starting before.
func TestReportHeldAfterAFailedDeploy(t *testing.T) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "shop-web-z2-0", Namespace: "shop", Annotations: map[string]string{names.AnnotationInjected: "true"},
			Labels: map[string]string{names.LabelInstanceGroup: "web", names.LabelInstanceIndex: "1"}},
		Spec: corev1.PodSpec{SchedulingGates: []corev1.PodSchedulingGate{{Name: names.SchedulingGateDeploy}},
			InitContainers: []corev1.Container{{Name: "render"}}, Containers: []corev1.Container{{Name: "storefront-storefront"}}},
	}
	for phase, want := range map[string]string{
		status.PhaseFailed:    "web/1 pod shop-web-z2-0: injected; not rendered; not started: the deploy stopped before its turn, as bosh deploy does\n",
		status.PhaseDeploying: "web/1 pod shop-web-z2-0: injected; not rendered; still starting\n",
	} {
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "shop-manifest", Namespace: "shop",
			Annotations: map[string]string{names.AnnotationDeploy: `{"phase":"` + phase + `"}`}}}
		s := &Sandbox{client: fake.NewClientBuilder().WithObjects(pod.DeepCopy(), secret).Build(), namespace: "shop", manifest: secret.Name}
		reports, err := s.observe(context.Background(), []workload{{Kind: "StatefulSet", Name: "shop-web-z2", Replicas: 1}}, false)
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		printReport(&out, reports)
		if !strings.Contains(out.String(), want) || reports[0].Settled != (phase == status.PhaseFailed) {
			t.Errorf("deploy %s: settled %v, report:\n%s\nwant %q", phase, reports[0].Settled, out.String(), want)
		}
	}
}

// TestDefaultDir: each sandbox name has a state directory of its own.
func TestDefaultDir(t *testing.T) {
	t.Setenv("TMPDIR", "/tmp/x")
	for name, want := range map[string]string{"": "/tmp/x/bosh-injector-sandbox", "cf": "/tmp/x/bosh-injector-sandbox-cf"} {
		if got, err := DefaultDir(name); err != nil || got != want {
			t.Errorf("DefaultDir(%q) = %s, %v; want %s", name, got, err, want)
		}
	}
	if _, err := DefaultDir("a/b"); err == nil || !strings.Contains(err.Error(), "SANDBOX=a/b") {
		t.Errorf("DefaultDir(a/b): %v", err)
	}
}
