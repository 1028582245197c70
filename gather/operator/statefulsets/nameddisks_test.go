package statefulsets_test

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/bosh-injector/bosh-injector/gather/names"
	"github.com/bosh-injector/bosh-injector/gather/operator/statefulsets"
	"github.com/bosh-injector/bosh-injector/test/fixtures"
)

// A group's named disks (persistent_disks) grow as the managed disk does,
// each by its own template: a larger type of one records that one's size.
func TestKeepTemplatesNamedDisks(t *testing.T) {
	named := func(index, blob string) *appsv1.StatefulSet {
		s := fixtures.DiskStatefulSet("ns", "grows", 1)
		t0 := s.Spec.VolumeClaimTemplates[0]
		s.Spec.VolumeClaimTemplates = nil
		for disk, size := range map[string]string{"index": index, "blob_store": blob} {
			c := *t0.DeepCopy()
			c.Name = names.NamedDiskVolume(disk)
			c.Annotations = map[string]string{names.AnnotationDiskName: disk}
			c.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse(size)
			s.Spec.VolumeClaimTemplates = append(s.Spec.VolumeClaimTemplates, c)
		}
		// In manifest order, as objects writes them.
		if s.Spec.VolumeClaimTemplates[0].Name != "disk-index" {
			v := s.Spec.VolumeClaimTemplates
			v[0], v[1] = v[1], v[0]
		}
		return s
	}
	old, update := named("64Mi", "128Mi"), named("64Mi", "256Mi")
	changed, err := statefulsets.KeepTemplates(old, update)
	if err != nil || !changed {
		t.Fatalf("KeepTemplates = %v, %v; want a change", changed, err)
	}
	if got := update.Annotations[names.AnnotationDiskSizes]; got != `{"disk-blob-store":"256Mi"}` {
		t.Errorf("wanted sizes = %s", got)
	}
	if got := update.Spec.VolumeClaimTemplates[1].Spec.Resources.Requests[corev1.ResourceStorage]; got.String() != "128Mi" {
		t.Errorf("template size = %s, want the old 128Mi kept", got.String())
	}
}
