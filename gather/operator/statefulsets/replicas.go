package statefulsets

import (
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/utils/ptr"

	"github.com/bosh-injector/bosh-injector/gather/names"
)

// KeepReplicas holds a user's update of a StatefulSet that lowers its
// replicas for the deploy controller to pace: update keeps old's replicas
// and records the count asked for in AnnotationScaleDown. More replicas
// than old's end a recorded scale-down (the user's count stands); as many
// keep it, as any update not about replicas (a label) must. It says
// whether it changed update.
func KeepReplicas(old, update *appsv1.StatefulSet) bool {
	was, want := ptr.Deref(old.Spec.Replicas, 1), ptr.Deref(update.Spec.Replicas, 1)
	if want < was {
		if update.Annotations == nil {
			update.Annotations = map[string]string{}
		}
		update.Annotations[names.AnnotationScaleDown] = strconv.Itoa(int(want))
		update.Spec.Replicas = ptr.To(was)
		return true
	}
	if _, ok := update.Annotations[names.AnnotationScaleDown]; ok && want > was {
		delete(update.Annotations, names.AnnotationScaleDown)
		return true
	}
	return false
}
