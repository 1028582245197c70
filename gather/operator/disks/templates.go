package disks

import (
	"encoding/json"
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/bosh-injector/bosh-injector/gather/names"
)

// Reasons a StatefulSet update is refused; the text is readable as it is
// and labels logs and the denial metric.
const (
	ReasonDiskShrink  = "persistent disk cannot shrink"
	ReasonDiskChanged = "persistent disk changed beyond its size"
)

// ReasonCodes are the reasons' stable CamelCase values for metric labels.
var ReasonCodes = map[string]string{ReasonDiskShrink: "DiskShrink", ReasonDiskChanged: "DiskChanged"}

// Refusal is a refused StatefulSet update, with what to do.
type Refusal struct {
	Reason, Message string
}

func (r *Refusal) Error() string { return r.Reason + ": " + r.Message }

// KeepTemplates lets a StatefulSet update change its claims' sizes, which
// Kubernetes refuses (volumeClaimTemplates are immutable, with no feature
// gate in 1.37): it puts the old templates back into update and records
// the sizes asked for in names.AnnotationDiskSizes, which the operator
// grows the claims to. It reports whether it changed update. A smaller
// size is refused, as a claim cannot shrink (the director would migrate
// the data to a new, smaller disk); so is any other change to a template
// (class, access modes, a disk added or removed), which would need that
// migration too.
func KeepTemplates(old, update *appsv1.StatefulSet) (bool, error) {
	if equality.Semantic.DeepEqual(old.Spec.VolumeClaimTemplates, update.Spec.VolumeClaimTemplates) {
		return carryWanted(old, update), nil
	}
	wanted, err := WantedSizes(old)
	if err != nil {
		return false, err
	}
	if wanted == nil {
		wanted = map[string]resource.Quantity{}
	}
	group := update.Spec.Template.Labels[names.LabelInstanceGroup]
	if !slices.EqualFunc(old.Spec.VolumeClaimTemplates, update.Spec.VolumeClaimTemplates, func(a, b corev1.PersistentVolumeClaim) bool { return a.Name == b.Name }) {
		return false, &Refusal{Reason: ReasonDiskChanged, Message: fmt.Sprintf("instance group '%s' (StatefulSet %s): adding or removing a persistent disk of a running group is not supported: delete the StatefulSet (its claims are kept, as orphaned disks) and apply it again", group, update.Name)}
	}
	for i, t := range update.Spec.VolumeClaimTemplates {
		o := old.Spec.VolumeClaimTemplates[i]
		size := t.Spec.Resources.Requests[corev1.ResourceStorage]
		current, ok := wanted[t.Name]
		if !ok {
			current = o.Spec.Resources.Requests[corev1.ResourceStorage]
		}
		resized := t.DeepCopy()
		resized.Spec.Resources.Requests[corev1.ResourceStorage] = o.Spec.Resources.Requests[corev1.ResourceStorage]
		if !equality.Semantic.DeepEqual(resized.Spec, o.Spec) || !equality.Semantic.DeepEqual(resized.ObjectMeta, o.ObjectMeta) {
			return false, &Refusal{Reason: ReasonDiskChanged, Message: fmt.Sprintf("instance group '%s' (StatefulSet %s): persistent disk '%s' can only change its size: its StorageClass, access modes and labels stay as they are (the director would migrate the data to a new disk)", group, update.Name, t.Name)}
		}
		switch size.Cmp(current) {
		case -1:
			return false, &Refusal{Reason: ReasonDiskShrink, Message: fmt.Sprintf("instance group '%s' (StatefulSet %s): persistent disk '%s' of %s cannot shrink to %s: a claim only grows", group, update.Name, t.Name, current.String(), size.String())}
		case 1:
			wanted[t.Name] = size
		}
	}
	update.Spec.VolumeClaimTemplates = old.Spec.VolumeClaimTemplates
	raw, err := json.Marshal(wanted)
	if err != nil {
		return false, err
	}
	if len(wanted) > 0 {
		if update.Annotations == nil {
			update.Annotations = map[string]string{}
		}
		update.Annotations[names.AnnotationDiskSizes] = string(raw)
	}
	return true, nil
}

// carryWanted keeps the old wanted sizes on an update that left them out
// (`kubectl replace`, an apply whose manager never set them), so that the
// claims are not left half grown.
func carryWanted(old, update *appsv1.StatefulSet) bool {
	v, ok := old.Annotations[names.AnnotationDiskSizes]
	if !ok {
		return false
	}
	if _, has := update.Annotations[names.AnnotationDiskSizes]; has {
		return false
	}
	if update.Annotations == nil {
		update.Annotations = map[string]string{}
	}
	update.Annotations[names.AnnotationDiskSizes] = v
	return true
}
