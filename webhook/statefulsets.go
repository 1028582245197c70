package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/bosh-injector/bosh-injector/gather/names"
	"github.com/bosh-injector/bosh-injector/gather/operator/statefulsets"
	"github.com/bosh-injector/bosh-injector/inject"
)

// StatefulSetPath is where the StatefulSet update webhook is served. The
// name is older than what it admits (it keeps replicas too), and it stays:
// an upgrade's webhook configuration calling a path the running operator
// does not serve gets 404, which the API server ignores (failurePolicy
// Ignore) and then refuses a larger disk as an immutable change.
const StatefulSetPath = "/resize-disks"

// StatefulSets lets users change an instance group's persistent disk size
// and instances with `objects` and `kubectl apply` as with any other
// field: it keeps the immutable volumeClaimTemplates and records the new
// sizes and set of disks for the disk controller (statefulsets.KeepTemplates), and keeps lowered
// replicas, recording the count for the deploy controller to remove the
// instances max_in_flight at a time (statefulsets.KeepReplicas).
type StatefulSets struct {
	Log logr.Logger
	// Operator is the operator's user name: its own updates (the deploy
	// controller's paced scale-down) pass as they are.
	Operator string
}

// Handle mutates StatefulSet updates of deployments.
func (h *StatefulSets) Handle(_ context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Update {
		return admission.Allowed("not an update")
	}
	var old, update appsv1.StatefulSet
	if err := json.Unmarshal(req.OldObject.Raw, &old); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	if err := json.Unmarshal(req.Object.Raw, &update); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	if update.Spec.Template.Labels[names.LabelDeployment] == "" {
		return admission.Allowed("not a deployment's StatefulSet")
	}
	log := h.Log.WithValues("namespace", req.Namespace, "statefulset", req.Name)
	changed, err := statefulsets.KeepTemplates(&old, &update)
	var denial *inject.Denial
	if errors.As(err, &denial) {
		return refuse(log, denial)
	}
	if err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	if changed {
		log.Info("persistent disk changes recorded for the disk controller", "sizes", update.Annotations[names.AnnotationDiskSizes], "disks", statefulsets.DiskNames(&update))
	}
	if req.UserInfo.Username != h.Operator && statefulsets.KeepReplicas(&old, &update) {
		changed = true
		if to, ok := update.Annotations[names.AnnotationScaleDown]; ok {
			log.Info("scale-down recorded for the deploy controller", "replicas", *update.Spec.Replicas, "to", to)
		}
	}
	if !changed {
		return admission.Allowed("persistent disks and replicas unchanged")
	}
	raw, err := json.Marshal(&update)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	return admission.PatchResponseFromRaw(req.Object.Raw, raw)
}
