// Package podstate holds what the operator and the day-2 commands read of a
// pod's status alike.
package podstate

import corev1 "k8s.io/api/core/v1"

// Ready says whether the pod's Ready condition is true.
func Ready(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
