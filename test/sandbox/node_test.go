package sandbox

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/bosh-injector/bosh-injector/test/podman"
)

// A process that exits is started again, as a kubelet restarts its container
// (a job binding its own address may start before that name resolves):
// main containers only, under the pod's restart policy.
func TestToRestart(t *testing.T) {
	results := []podman.ContainerResult{
		{Name: "render", Ran: true, ExitCode: 0},
		{Name: "nats-nats", Ran: true, ExitCode: 1},
		{Name: "nats-healthcheck", Ran: true, ExitCode: 0},
		{Name: "web-web", Running: true},
	}
	pod := func(policy corev1.RestartPolicy) *corev1.Pod {
		return &corev1.Pod{Spec: corev1.PodSpec{
			RestartPolicy:  policy,
			InitContainers: []corev1.Container{{Name: "render"}},
			Containers:     []corev1.Container{{Name: "nats-nats"}, {Name: "nats-healthcheck"}, {Name: "web-web"}},
		}}
	}
	for policy, want := range map[corev1.RestartPolicy][]string{
		corev1.RestartPolicyAlways:    {"nats-nats", "nats-healthcheck"},
		corev1.RestartPolicyOnFailure: {"nats-nats"},
		corev1.RestartPolicyNever:     nil,
	} {
		var got []string
		for _, i := range toRestart(pod(policy), results) {
			got = append(got, results[i].Name)
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: got %v, want %v", policy, got, want)
		}
	}
}
