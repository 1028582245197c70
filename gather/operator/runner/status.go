package runner

import (
	"context"
	"encoding/json"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bosh-injector/bosh-injector/gather/names"
	"github.com/bosh-injector/bosh-injector/gather/operator/status"
)

// setStatus records st in the manifest Secret's status annotation and state
// label, stamping the time of the change.
func (r *Reconciler) setStatus(ctx context.Context, manifest *corev1.Secret, st status.Gathering) error {
	r.metrics.state(manifest, st.State)
	// The versions in use stay those of the last good gathering until
	// another one succeeds.
	if st.Versions == nil {
		st.Versions, st.Plan = status.GatheringOf(manifest).Versions, status.GatheringOf(manifest).Plan
	}
	if status.GatheringOf(manifest).Same(st) && manifest.Labels[names.LabelState] == status.StateOf(st.State) {
		return nil
	}
	st.LastChange = time.Now().UTC().Format(time.RFC3339)
	data, err := json.Marshal(st)
	if err != nil {
		return err
	}
	patch := client.MergeFrom(manifest.DeepCopy())
	if manifest.Annotations == nil {
		manifest.Annotations = map[string]string{}
	}
	manifest.Annotations[names.AnnotationStatus] = string(data)
	manifest.Labels[names.LabelState] = status.StateOf(st.State)
	return r.Client.Patch(ctx, manifest, patch)
}
