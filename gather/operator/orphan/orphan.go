// Package orphan is the one rule of an orphaned persistent disk, shared by
// the operator's disk controller (gather/operator/disks), which marks,
// adopts back and expires claims, and the client commands
// (gather/client/disks, day2), which list, attach and delete them: the
// mark (names.LabelOrphaned with the time and the instance it was of),
// its test, and how an orphan is deleted. It holds no controller.
package orphan

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bosh-injector/bosh-injector/gather/names"
)

// Selector lists the orphaned claims.
var Selector = client.MatchingLabels{names.LabelOrphaned: "true"}

// Is says whether the claim is marked orphaned.
func Is(claim *corev1.PersistentVolumeClaim) bool {
	return claim.Labels[names.LabelOrphaned] == "true"
}

// Instance is the instance an orphaned claim belonged to, as the director
// names it: "group/uuid (index)".
func Instance(claim *corev1.PersistentVolumeClaim) string {
	return claim.Annotations[names.AnnotationOrphanedInstance]
}

// At is when the claim was orphaned (RFC 3339), "" when unknown.
func At(claim *corev1.PersistentVolumeClaim) string {
	return claim.Annotations[names.AnnotationOrphanedAt]
}

// Mark marks a claim orphaned at now, of instance.
func Mark(m *metav1.ObjectMeta, instance string, now time.Time) {
	set(&m.Labels, names.LabelOrphaned, "true")
	set(&m.Annotations, names.AnnotationOrphanedAt, now.UTC().Format(time.RFC3339))
	set(&m.Annotations, names.AnnotationOrphanedInstance, instance)
}

// Unmark takes the mark off a claim an instance mounts again.
func Unmark(m *metav1.ObjectMeta) {
	delete(m.Labels, names.LabelOrphaned)
	delete(m.Annotations, names.AnnotationOrphanedAt)
	delete(m.Annotations, names.AnnotationOrphanedInstance)
}

// Delete deletes an orphaned claim as it was read: the preconditions keep
// a claim adopted back meanwhile.
func Delete(ctx context.Context, c client.Writer, claim *corev1.PersistentVolumeClaim) error {
	return c.Delete(ctx, claim, client.Preconditions{UID: &claim.UID, ResourceVersion: &claim.ResourceVersion})
}

func set(m *map[string]string, k, v string) {
	if *m == nil {
		*m = map[string]string{}
	}
	(*m)[k] = v
}
