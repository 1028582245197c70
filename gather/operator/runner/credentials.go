package runner

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/bosh-injector/bosh-injector/gather/names"
)

// finalizerCredentials holds a manifest Secret labelled
// delete-credentials=true until its generated variable Secrets are deleted.
const finalizerCredentials = names.Prefix + "delete-credentials"

// ReasonCredentialsDeleted is the Event of a deployment's generated
// credentials deleted with its manifest Secret.
const ReasonCredentialsDeleted = "CredentialsDeleted"

// CredentialsSelector selects the generated variable Secrets of deployment
// (never a user-provided one): the same selector as the README's kubectl
// command.
func CredentialsSelector(deployment string) client.MatchingLabels {
	return client.MatchingLabels{
		names.LabelDeployment: names.LabelValue(deployment),
		names.LabelSecretKind: names.KindVariable,
		names.LabelManagedBy:  names.ManagedBy,
	}
}

// credentials keeps the finalizer of a manifest Secret in line with its
// delete-credentials label and, once such a Secret is being deleted,
// deletes the deployment's generated variables and lets it go. Generated
// variables are owned by nothing, so without the label they outlive the
// manifest. deleted says the manifest is going away and needs nothing else.
func (r *Reconciler) credentials(ctx context.Context, manifest *corev1.Secret, deployment string) (deleted bool, err error) {
	has := controllerutil.ContainsFinalizer(manifest, finalizerCredentials)
	if manifest.DeletionTimestamp != nil {
		if !has {
			return true, nil
		}
		var list corev1.SecretList
		if err := r.Client.List(ctx, &list, client.InNamespace(manifest.Namespace), CredentialsSelector(deployment)); err != nil {
			return true, err
		}
		for i := range list.Items {
			if err := r.Client.Delete(ctx, &list.Items[i]); client.IgnoreNotFound(err) != nil {
				return true, fmt.Errorf("deleting variable Secret %s: %w", list.Items[i].Name, err)
			}
		}
		r.Log.Info("deleted generated credentials with the manifest", "namespace", manifest.Namespace, "deployment", deployment, "secrets", len(list.Items))
		r.Recorder.Eventf(manifest, nil, corev1.EventTypeNormal, ReasonCredentialsDeleted, "Delete", "deleted %d generated variable Secrets, as label %s asks", len(list.Items), names.LabelDeleteCredentials)
		patch := client.MergeFrom(manifest.DeepCopy())
		controllerutil.RemoveFinalizer(manifest, finalizerCredentials)
		return true, client.IgnoreNotFound(r.Client.Patch(ctx, manifest, patch))
	}
	want := manifest.Labels[names.LabelDeleteCredentials] == "true"
	if want == has {
		return false, nil
	}
	patch := client.MergeFrom(manifest.DeepCopy())
	if want {
		controllerutil.AddFinalizer(manifest, finalizerCredentials)
	} else {
		controllerutil.RemoveFinalizer(manifest, finalizerCredentials)
	}
	return false, r.Client.Patch(ctx, manifest, patch)
}
