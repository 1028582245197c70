package webhook

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bosh-injector/bosh-injector/gather/names"
	"github.com/bosh-injector/bosh-injector/gather/operator/status"
	"github.com/bosh-injector/bosh-injector/inject"
)

// instanceState reads, from the deployment's manifest Secrets (cached, as
// every Secret of a deployment; read once per admission, without copies),
// what the operator and the client commands decided for a StatefulSet pod's
// instance:
//   - held: the deploy has yet to start it: its ordinal is not below the
//     count of instances the deploy controller started in that StatefulSet.
//     A pod of an instance already started (recreated after a node loss,
//     `kubectl delete pod`, a rollout) is not held again.
//   - stopped: the name of the instance `bosh-injector stop` stopped with no
//     `start`, `restart` or `recreate` since (names.AnnotationStopped); ""
//     otherwise.
func (h *Handler) instanceState(ctx context.Context, namespace, deployment string, pod *corev1.Pod) (held bool, stopped string, err error) {
	set, ordinal, ok := inject.StatefulSetOrdinal(pod)
	if !ok {
		return false, "", nil
	}
	secrets, err := status.ManifestSecrets(ctx, h.Cache, namespace, deployment, client.UnsafeDisableDeepCopy)
	if err != nil {
		return false, "", fmt.Errorf("reading the deploy and instance states of deployment '%s': %w", deployment, err)
	}
	held = true
	for _, s := range secrets {
		if _, ok := s.Annotations[names.AnnotationDeploy]; ok && ordinal < status.DeployOf(s).Instances[set] {
			held = false
		}
		if instance, ok := s.Annotations[names.AnnotationStopped(pod.Name)]; ok && pod.Name != "" && stopped == "" {
			stopped = instance
		}
	}
	return held, stopped, nil
}

// keepStopped gives the pod of a stopped instance the desired state its
// launchers start in: stopped, until `start`.
func keepStopped(pod *corev1.Pod) {
	metav1.SetMetaDataAnnotation(&pod.ObjectMeta, names.AnnotationDesiredState, names.DesiredStopped)
}
