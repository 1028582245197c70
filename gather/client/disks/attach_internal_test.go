package disks

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bosh-injector/bosh-injector/gather/names"
)

func TestInstanceClaim(t *testing.T) {
	pod := func(claims ...string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "db-0"}}
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
		for _, c := range claims {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: c, VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: c}}})
		}
		return p
	}
	if got, err := instanceClaim(pod("store-db-0"), "store"); got != "store-db-0" || err != nil {
		t.Errorf("one claim: %q %v", got, err)
	}
	if got, err := instanceClaim(pod("logs-db-0", "store-db-0"), "store"); got != "store-db-0" || err != nil {
		t.Errorf("two claims: %q %v", got, err)
	}
	// Named disks "a" and "a-b": the claim of template disk-a only.
	if got, err := instanceClaim(pod("disk-a-b-db-0", "disk-a-db-0"), "disk-a"); got != "disk-a-db-0" || err != nil {
		t.Errorf("named disks: %q %v", got, err)
	}
	if _, err := instanceClaim(pod(), "store"); err == nil || !strings.Contains(err.Error(), "pod db-0 has no persistent disk") {
		t.Errorf("no claim: %v", err)
	}
}

func TestOrphanOf(t *testing.T) {
	current := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "store-db-0", UID: "u", ResourceVersion: "7",
			Labels: map[string]string{names.LabelDeployment: "shop", names.LabelOrphaned: "false"}},
		Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv-new",
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}},
		Status: corev1.PersistentVolumeClaimStatus{Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("2Gi")}},
	}
	now := time.Date(2026, 11, 26, 13, 0, 0, 0, time.UTC)
	o := orphanOf(current, "pv-old", "db/abc (0)", now)
	size := o.Spec.Resources.Requests[corev1.ResourceStorage]
	if !strings.HasPrefix(o.Name, "store-db-0-orphan-") || o.UID != "" || o.ResourceVersion != "" ||
		o.Spec.VolumeName != "pv-old" || size.String() != "2Gi" ||
		o.Labels[names.LabelOrphaned] != "true" || o.Labels[names.LabelDeployment] != "shop" ||
		o.Annotations[names.AnnotationOrphanedInstance] != "db/abc (0)" || o.Annotations[names.AnnotationOrphanedAt] != "2026-11-26T13:00:00Z" {
		t.Errorf("orphan: %+v", o)
	}
	if current.Spec.VolumeName != "pv-new" {
		t.Error("the current claim was changed")
	}
}
