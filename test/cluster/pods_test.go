package cluster_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/bosh-injector/bosh-injector/test/cluster"
)

// The kubelet's status is all there is: a pod has ended when every
// container ended, or when an init container failed (the kubelet restarts
// it, its last termination says why).
func TestContainers(t *testing.T) {
	spec := corev1.PodSpec{InitContainers: []corev1.Container{{Name: "copy"}, {Name: "render"}}, Containers: []corev1.Container{{Name: "web"}}}
	terminated := func(code int32, msg string) corev1.ContainerState {
		return corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Message: msg}}
	}
	waiting := func(reason string) corev1.ContainerState {
		return corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason}}
	}
	for _, tc := range []struct {
		name   string
		status corev1.PodStatus
		ended  bool
		render cluster.Container
	}{
		{"pending", corev1.PodStatus{Phase: corev1.PodPending}, false, cluster.Container{Name: "render", Init: true}},
		{"rendering", corev1.PodStatus{Phase: corev1.PodPending,
			InitContainerStatuses: []corev1.ContainerStatus{{Name: "copy", State: terminated(0, "")}, {Name: "render", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}},
			ContainerStatuses:     []corev1.ContainerStatus{{Name: "web", State: waiting("PodInitializing")}}},
			false, cluster.Container{Name: "render", Init: true, Running: true}},
		{"render failed, restarting", corev1.PodStatus{Phase: corev1.PodPending,
			InitContainerStatuses: []corev1.ContainerStatus{{Name: "copy", State: terminated(0, "")},
				{Name: "render", State: waiting("CrashLoopBackOff"), LastTerminationState: terminated(1, "Error filling in template")}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "web", State: waiting("PodInitializing")}}},
			true, cluster.Container{Name: "render", Init: true, Ran: true, ExitCode: 1, TerminationMessage: "Error filling in template", Restarting: true}},
		{"running", corev1.PodStatus{Phase: corev1.PodRunning,
			InitContainerStatuses: []corev1.ContainerStatus{{Name: "copy", State: terminated(0, "")}, {Name: "render", State: terminated(0, "")}},
			ContainerStatuses:     []corev1.ContainerStatus{{Name: "web", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}},
			false, cluster.Container{Name: "render", Init: true, Ran: true}},
		{"succeeded", corev1.PodStatus{Phase: corev1.PodSucceeded,
			InitContainerStatuses: []corev1.ContainerStatus{{Name: "copy", State: terminated(0, "")}, {Name: "render", State: terminated(0, "")}},
			ContainerStatuses:     []corev1.ContainerStatus{{Name: "web", State: terminated(0, "")}}},
			true, cluster.Container{Name: "render", Init: true, Ran: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			results, ended := cluster.Containers(&corev1.Pod{Spec: spec, Status: tc.status})
			if ended != tc.ended {
				t.Errorf("ended %v, want %v", ended, tc.ended)
			}
			if len(results) != 3 || results[1] != tc.render {
				t.Errorf("render result %+v, want %+v", results, tc.render)
			}
		})
	}
}

// A process that just exited counts as restarting before the kubelet says
// so (CrashLoopBackOff), under the pod's restart policy; a Job's pod that
// never restarts has ended.
func TestContainerStartedAgain(t *testing.T) {
	exited := corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{Name: "web",
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1}}}}}
	for policy, want := range map[corev1.RestartPolicy]bool{"": true, corev1.RestartPolicyAlways: true, corev1.RestartPolicyOnFailure: true, corev1.RestartPolicyNever: false} {
		pod := &corev1.Pod{Spec: corev1.PodSpec{RestartPolicy: policy, Containers: []corev1.Container{{Name: "web"}}}, Status: exited}
		got, ended := cluster.Containers(pod)
		if got[0].Restarting != want || ended == want {
			t.Errorf("restartPolicy %q: restarting %v, ended %v; want restarting %v", policy, got[0].Restarting, ended, want)
		}
	}
}
