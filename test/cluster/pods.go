package cluster

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Container is how one of a pod's containers does, as the kubelet reports
// it in the pod's status.
type Container struct {
	Name string
	// Init: an init container.
	Init bool
	// Running and Ready: started and not ended; its readiness.
	Running, Ready bool
	// Ran: it ended (this time or, while it waits to be started again,
	// the last time), with ExitCode and TerminationMessage.
	Ran                bool
	ExitCode           int
	TerminationMessage string
	// Restarts is how often the kubelet started it again; Restarting: it
	// waits to be (CrashLoopBackOff).
	Restarts   int
	Restarting bool
	// LastExit is how its run before the last restart ended: exit code,
	// reason and message, as the kubelet recorded them.
	LastExit string
	// Waiting is the reason and message of a container not started yet.
	Waiting string
	// Logs, when the caller fetched them.
	Logs string
}

// Containers reads the pod's init containers and containers, in order,
// from its status; ended says whether the pod has: it reached a final
// phase, an init container failed (the kubelet starts it again, nothing
// after it runs meanwhile), or every container ended.
func Containers(pod *corev1.Pod) (out []Container, ended bool) {
	statuses := map[string]corev1.ContainerStatus{}
	for _, s := range append(append([]corev1.ContainerStatus{}, pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...) {
		statuses[s.Name] = s
	}
	ended = len(pod.Status.ContainerStatuses) > 0
	initFailed := false
	for i, c := range append(append([]corev1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...) {
		s := statuses[c.Name]
		r := Container{Name: c.Name, Init: i < len(pod.Spec.InitContainers), Ready: s.Ready, Restarts: int(s.RestartCount)}
		if last := s.LastTerminationState.Terminated; last != nil && s.RestartCount > 0 {
			r.LastExit = fmt.Sprintf("exit %d (%s) at %s: %s", last.ExitCode, last.Reason, last.FinishedAt.UTC().Format(time.RFC3339), last.Message)
		}
		t := s.State.Terminated
		if t == nil && s.State.Waiting != nil {
			t = s.LastTerminationState.Terminated
			r.Restarting = t != nil
		}
		switch {
		case s.State.Running != nil:
			r.Running = true
			ended = false
		case t != nil:
			r.Ran, r.ExitCode, r.TerminationMessage = true, int(t.ExitCode), t.Message
			// Just ended, it is started again all the same under the pod's
			// restart policy (the status says so only once it waits).
			r.Restarting = r.Restarting || restarts(pod, r.Init, t.ExitCode)
			initFailed = initFailed || (r.Init && t.ExitCode != 0)
			ended = ended && !r.Restarting
		default:
			if s.State.Waiting != nil {
				r.Waiting = s.State.Waiting.Reason + " " + s.State.Waiting.Message
			}
			ended = false
		}
		out = append(out, r)
	}
	final := pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
	return out, final || initFailed || ended
}

// restarts says whether the kubelet starts a container again that ended
// with code: under restartPolicy Always (the default) every container of
// the pod that fails and every main container, under OnFailure those that
// fail.
func restarts(pod *corev1.Pod, init bool, code int32) bool {
	switch pod.Spec.RestartPolicy {
	case corev1.RestartPolicyNever:
		return false
	case corev1.RestartPolicyOnFailure:
		return code != 0
	default:
		return code != 0 || !init
	}
}
