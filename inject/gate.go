package inject

import (
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/bosh-injector/bosh-injector/gather/names"
)

// A BOSH director starts a deployment's new instances in its update order:
// groups in manifest order, canaries first, then max_in_flight at a time.
// The pod of an instance the deploy has not started yet (Plan.Held) gets
// the scheduling gate names.SchedulingGateDeploy: it stays Pending, visible
// as SchedulingGated, until the deploy controller removes the gate at the
// instance's turn. A gate can only be removed after creation, so it is
// added here or never.

// hold adds the deploy's gate to pod and says whether it was not there.
func hold(pod *corev1.Pod) bool {
	if Gated(pod) {
		return false
	}
	pod.Spec.SchedulingGates = append(pod.Spec.SchedulingGates, corev1.PodSchedulingGate{Name: names.SchedulingGateDeploy})
	return true
}

// Ungate removes the deploy's gate from pod.
func Ungate(pod *corev1.Pod) {
	pod.Spec.SchedulingGates = slices.DeleteFunc(pod.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool { return g.Name == names.SchedulingGateDeploy })
	if len(pod.Spec.SchedulingGates) == 0 {
		pod.Spec.SchedulingGates = nil
	}
}

// Gated says whether the deploy's gate holds pod.
func Gated(pod *corev1.Pod) bool {
	return slices.ContainsFunc(pod.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool { return g.Name == names.SchedulingGateDeploy })
}

// StatefulSetOrdinal is the StatefulSet a pod belongs to (its controller)
// and its ordinal there; ok is false for any other pod (an errand's Job
// pod, a bare pod), which no deploy holds.
func StatefulSetOrdinal(pod *corev1.Pod) (set string, index int, ok bool) {
	for _, ref := range pod.OwnerReferences {
		if ref.Controller != nil && *ref.Controller && ref.Kind == "StatefulSet" && ref.APIVersion == "apps/v1" {
			return ref.Name, ordinal(pod), true
		}
	}
	return "", 0, false
}
