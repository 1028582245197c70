package webhook

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bosh-injector/bosh-injector/gather/names"
	"github.com/bosh-injector/bosh-injector/gather/operator/rollout"
	"github.com/bosh-injector/bosh-injector/inject"
)

// held says whether the deploy has yet to start a StatefulSet pod's
// instance: its ordinal is not below the count of instances the deploy
// controller started in that StatefulSet, which the deploy status of the
// deployment's manifest Secret (cached, as every Secret of a deployment)
// records. A pod of an instance already started (recreated after a node
// loss, `kubectl delete pod`, a rollout) is not held again.
func (h *Handler) held(ctx context.Context, namespace, deployment string, pod *corev1.Pod) (bool, error) {
	set, ordinal, ok := inject.StatefulSetOrdinal(pod)
	if !ok {
		return false, nil
	}
	secrets, err := h.manifestSecrets(ctx, namespace, deployment)
	if err != nil {
		return false, fmt.Errorf("reading the deploy of deployment '%s': %w", deployment, err)
	}
	for i := range secrets {
		if _, ok := secrets[i].Annotations[names.AnnotationDeploy]; ok && ordinal < rollout.StatusOf(&secrets[i]).Instances[set] {
			return false, nil
		}
	}
	return true, nil
}

// manifestSecrets are the deployment's Secrets but the versioned ones (a
// secret-kind label), which are most of a deployment's and the largest:
// its manifest Secret. They are the cache's, read without copies.
func (h *Handler) manifestSecrets(ctx context.Context, namespace, deployment string) ([]corev1.Secret, error) {
	manifests, err := labels.Parse(fmt.Sprintf("%s=%s,!%s", names.LabelDeployment, names.LabelValue(deployment), names.LabelSecretKind))
	if err != nil {
		return nil, err
	}
	var secrets corev1.SecretList
	if err := h.Cache.List(ctx, &secrets, client.InNamespace(namespace), client.MatchingLabelsSelector{Selector: manifests}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	return secrets.Items, nil
}
