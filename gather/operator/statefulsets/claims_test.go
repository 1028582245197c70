package statefulsets_test

import (
	"errors"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"github.com/bosh-injector/bosh-injector/gather/names"
	"github.com/bosh-injector/bosh-injector/gather/operator/statefulsets"
	"github.com/bosh-injector/bosh-injector/inject"
	"github.com/bosh-injector/bosh-injector/test/fixtures"
)

func sized(size string, class string) *appsv1.StatefulSet {
	s := fixtures.DiskStatefulSet("ns", class, 2)
	s.Spec.VolumeClaimTemplates[0].Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse(size)
	return s
}

func TestKeepTemplates(t *testing.T) {
	old := sized("1Gi", "grows")
	update := sized("2Gi", "grows")
	changed, err := statefulsets.KeepTemplates(old, update)
	if err != nil || !changed {
		t.Fatalf("KeepTemplates = %v, %v; want a change", changed, err)
	}
	if got := update.Spec.VolumeClaimTemplates[0].Spec.Resources.Requests[corev1.ResourceStorage]; got.String() != "1Gi" {
		t.Errorf("template size = %s, want the old 1Gi kept", got.String())
	}
	if got := update.Annotations[names.AnnotationDiskSizes]; got != `{"store":"2Gi"}` {
		t.Errorf("wanted sizes = %s", got)
	}

	// The next apply: the template still says 1Gi, the user's object 2Gi.
	old, again := update, sized("2Gi", "grows")
	if changed, err := statefulsets.KeepTemplates(old, again); err != nil || !changed || again.Annotations[names.AnnotationDiskSizes] != `{"store":"2Gi"}` {
		t.Errorf("re-apply: %v, %v, %v", changed, err, again.Annotations)
	}
	// An update leaving the annotation out keeps it.
	same := old.DeepCopy()
	same.Annotations = nil
	if changed, err := statefulsets.KeepTemplates(old, same); err != nil || !changed || same.Annotations[names.AnnotationDiskSizes] != `{"store":"2Gi"}` {
		t.Errorf("annotation dropped: %v, %v, %v", changed, err, same.Annotations)
	}

	for name, c := range map[string]struct {
		update *appsv1.StatefulSet
		reason inject.Reason
	}{
		"smaller than wanted":   {sized("1536Mi", "grows"), inject.ReasonDiskShrink},
		"smaller than template": {sized("512Mi", "grows"), inject.ReasonDiskShrink},
		"another class":         {sized("2Gi", "other"), inject.ReasonDiskChanged},
	} {
		_, err := statefulsets.KeepTemplates(old, c.update)
		var r *inject.Denial
		if !errors.As(err, &r) || r.Reason != c.reason {
			t.Errorf("%s: err = %v, want %q", name, err, c.reason)
		}
	}
	// Unlabelled fields are not ours: a plain update passes unchanged.
	plain := sized("1Gi", "grows")
	plain.Spec.Replicas = ptr.To(int32(5))
	if changed, err := statefulsets.KeepTemplates(sized("1Gi", "grows"), plain); changed || err != nil {
		t.Errorf("plain update: %v, %v", changed, err)
	}
}

// A disk added or removed is recorded for the disk controller to replace
// the StatefulSet, a kept disk's new size as a resize; the templates stay.
func TestKeepTemplatesDiskSet(t *testing.T) {
	old := sized("1Gi", "grows")
	update := sized("2Gi", "grows")
	index := *update.Spec.VolumeClaimTemplates[0].DeepCopy()
	index.Name = names.NamedDiskVolume("index")
	update.Spec.VolumeClaimTemplates = append(update.Spec.VolumeClaimTemplates, index)
	changed, err := statefulsets.KeepTemplates(old, update)
	if err != nil || !changed {
		t.Fatalf("KeepTemplates = %v, %v; want a change", changed, err)
	}
	if len(update.Spec.VolumeClaimTemplates) != 1 {
		t.Errorf("templates = %d, want the old one kept", len(update.Spec.VolumeClaimTemplates))
	}
	if got := update.Annotations[names.AnnotationDiskSizes]; got != `{"store":"2Gi"}` {
		t.Errorf("wanted sizes = %s", got)
	}
	wanted, ok, err := statefulsets.WantedTemplates(update)
	if err != nil || !ok || len(wanted) != 2 || wanted[0].Name != "store" || wanted[1].Name != "disk-index" {
		t.Fatalf("wanted templates = %v, %v, %v", wanted, ok, err)
	}
	if got := wanted[0].Spec.Resources.Requests[corev1.ResourceStorage]; got.String() != "1Gi" {
		t.Errorf("kept disk's wanted template = %s, want 1Gi (grown by the resize)", got.String())
	}

	// The next apply leaves the annotations out: they are kept.
	same := update.DeepCopy()
	same.Annotations = nil
	if changed, err := statefulsets.KeepTemplates(update, same); err != nil || !changed || same.Annotations[names.AnnotationDiskTemplates] != update.Annotations[names.AnnotationDiskTemplates] {
		t.Errorf("annotation dropped: %v, %v, %v", changed, err, same.Annotations)
	}

	// Removing the only disk, with a resize of it waiting: its size is
	// no longer wanted.
	none := sized("2Gi", "grows")
	none.Spec.VolumeClaimTemplates = nil
	if changed, err := statefulsets.KeepTemplates(update, none); err != nil || !changed {
		t.Fatalf("remove: %v, %v", changed, err)
	}
	if got := none.Annotations[names.AnnotationDiskTemplates]; got != "[]" {
		t.Errorf("wanted templates = %s, want []", got)
	}
	if _, ok := none.Annotations[names.AnnotationDiskSizes]; ok {
		t.Errorf("a removed disk's size is still wanted: %v", none.Annotations)
	}
	if len(none.Spec.VolumeClaimTemplates) != 1 {
		t.Errorf("templates = %d, want the old one kept", len(none.Spec.VolumeClaimTemplates))
	}
}
