package webhook

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bosh-injector/bosh-injector/gather/names"
	"github.com/bosh-injector/bosh-injector/inject"
)

// stopped is the name of the instance a StatefulSet pod replaces when
// `bosh-injector stop` stopped it and no `start`, `restart` or `recreate`
// followed (names.AnnotationStopped on the deployment's manifest Secret);
// "" otherwise.
func (h *Handler) stopped(ctx context.Context, namespace, deployment string, pod *corev1.Pod) (string, error) {
	if _, _, ok := inject.StatefulSetOrdinal(pod); !ok || pod.Name == "" {
		return "", nil
	}
	secrets, err := h.manifestSecrets(ctx, namespace, deployment)
	if err != nil {
		return "", fmt.Errorf("reading the instance states of deployment '%s': %w", deployment, err)
	}
	for i := range secrets {
		if instance, ok := secrets[i].Annotations[names.AnnotationStopped(pod.Name)]; ok {
			return instance, nil
		}
	}
	return "", nil
}

// keepStopped gives the pod of a stopped instance the desired state its
// launchers start in: stopped, until `start`.
func keepStopped(pod *corev1.Pod) {
	metav1.SetMetaDataAnnotation(&pod.ObjectMeta, names.AnnotationDesiredState, names.DesiredStopped)
}
