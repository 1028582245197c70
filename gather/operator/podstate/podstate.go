// Package podstate holds what the operator and the day-2 commands read of a
// pod's status alike.
package podstate

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
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
