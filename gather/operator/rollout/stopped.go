package rollout

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/bosh-injector/bosh-injector/gather/names"
)

// stopped says whether pod is a stopped instance's (`bosh-injector stop`,
// whose state the webhook gives every new pod of the instance) and runs:
// a director updates a stopped instance without starting its jobs and
// without waiting for them, so its pod, never Ready while stopped, counts
// as updated once its containers run.
func stopped(pod *corev1.Pod) bool {
	return pod.Annotations[names.AnnotationDesiredState] == names.DesiredStopped && pod.Status.Phase == corev1.PodRunning
}
