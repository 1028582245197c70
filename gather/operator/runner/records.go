package runner

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/bosh-injector/bosh-injector/gather/gathering/trust"
	"github.com/bosh-injector/bosh-injector/gather/names"
	"github.com/bosh-injector/bosh-injector/gather/operator/status"
)

// forgetDeleted deletes the records of namespace's (every namespace's, for
// "") deployments that have no
// manifest Secret left (deleted, or their namespace is), so a deployment
// created again, in a namespace created again, starts clean instead of being
// denied for versions that are gone. Both are read from the API: a record
// the runner writes meanwhile for a new manifest changes its
// resourceVersion, which the deletion is conditional on.
func (r *Reconciler) forgetDeleted(ctx context.Context, namespace string) error {
	var records corev1.ConfigMapList
	sel := client.ListOption(client.HasLabels{trust.LabelNamespace})
	if namespace != "" {
		sel = client.MatchingLabels{trust.LabelNamespace: namespace}
	}
	if err := r.APIReader.List(ctx, &records, client.InNamespace(r.Config.TrustNamespace), sel); err != nil {
		return fmt.Errorf("listing the records of accepted versions: %w", err)
	}
	// One record's error (a namespace the operator may not read) does not
	// keep the others.
	var errs []error
	for i := range records.Items {
		cm := &records.Items[i]
		ns, deployment := cm.Labels[trust.LabelNamespace], cm.Annotations[names.AnnotationDeploymentName]
		manifests, err := status.ManifestRequests(ctx, r.APIReader, ns, deployment)
		if err != nil {
			errs = append(errs, fmt.Errorf("reading the manifest Secrets of deployment '%s' in namespace %s: %w", deployment, ns, err))
			continue
		}
		if len(manifests) > 0 {
			continue
		}
		err = r.Client.Delete(ctx, cm, client.Preconditions{UID: &cm.UID, ResourceVersion: &cm.ResourceVersion})
		switch {
		case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		case err != nil:
			errs = append(errs, fmt.Errorf("deleting the record %s of deleted deployment '%s': %w", cm.Name, deployment, err))
		default:
			r.Log.Info("deployment deleted: its record of accepted versions too", "namespace", ns, "deployment", deployment, "record", cm.Name)
		}
	}
	return errors.Join(errs...)
}

// forgetDeletedAtStart runs forgetDeleted over every namespace once the
// runner leads: deployments deleted while no operator ran.
func (r *Reconciler) forgetDeletedAtStart() manager.Runnable {
	return manager.RunnableFunc(func(ctx context.Context) error {
		if err := r.forgetDeleted(ctx, ""); err != nil {
			r.Log.Error(err, "forgetting deleted deployments")
		}
		return nil
	})
}
