// Package podstate holds what the operator and the day-2 commands read of a
// pod's status alike.
package podstate

import (
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/bosh-injector/bosh-injector/gather/names"
)

// Ready says whether the pod's Ready condition is true.
func Ready(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Running says whether the pod's container of that name runs.
func Running(pod *corev1.Pod, container string) bool {
	return slices.ContainsFunc(pod.Status.ContainerStatuses, func(s corev1.ContainerStatus) bool { return s.Name == container && s.State.Running != nil })
}

// Stopped says whether pod is a stopped instance's (`bosh-injector stop`,
// whose state the webhook gives every new pod of the instance) and runs:
// a director updates a stopped instance without starting its jobs and
// without waiting for them, so its pod, never Ready while stopped, counts
// as up to date once its containers run.
func Stopped(pod *corev1.Pod) bool {
	return pod.Annotations[names.AnnotationDesiredState] == names.DesiredStopped && pod.Status.Phase == corev1.PodRunning
}
