package disks

import (
	"reflect"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/bosh-injector/bosh-injector/gather/model/instance"
	"github.com/bosh-injector/bosh-injector/gather/model/update"
	"github.com/bosh-injector/bosh-injector/gather/names"
)

func set(name, az string, replicas int32) *appsv1.StatefulSet {
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.StatefulSetSpec{
			Replicas:             ptr.To(replicas),
			Template:             corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{names.LabelInstanceGroup: "db", names.LabelAZIndex: az}}},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "store"}}},
		},
	}
}

func pvc(name, az string, labels, annotations map[string]string) corev1.PersistentVolumeClaim {
	l := map[string]string{names.LabelInstanceGroup: "db", names.LabelAZIndex: az}
	for k, v := range labels {
		l[k] = v
	}
	return corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l, Annotations: annotations}}
}

func TestOrphanActions(t *testing.T) {
	now := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	orphaned := map[string]string{names.LabelOrphaned: "true"}
	at := func(d time.Duration) map[string]string {
		return map[string]string{names.AnnotationOrphanedAt: now.Add(-d).Format(time.RFC3339)}
	}
	sets := []*appsv1.StatefulSet{set("d-db-z1", "1", 1), set("d-db-z2", "2", 1)}
	claims := []corev1.PersistentVolumeClaim{
		pvc("store-d-db-z1-0", "1", nil, nil),                   // in use
		pvc("store-d-db-z2-1", "2", nil, nil),                   // scaled down: index 1×2+1 = 3
		pvc("store-d-db-z1-1", "1", orphaned, at(time.Hour)),    // orphan, kept
		pvc("store-d-db-z2-0", "2", orphaned, at(time.Hour)),    // mounted again
		pvc("store-d-old-0", "1", orphaned, at(6*24*time.Hour)), // expired
	}
	actions, next := orphanActions("d", claims, sets, now, DefaultRetention)
	type got struct {
		claim    string
		change   change
		instance string
	}
	var gots []got
	for _, a := range actions {
		gots = append(gots, got{a.claim.Name, a.change, a.instance})
	}
	want := []got{
		{"store-d-db-z2-1", mark, "db/" + instance.ID("d", "db", 3) + " (3)"},
		{"store-d-db-z2-0", adopt, ""},
		{"store-d-old-0", expire, ""},
	}
	if !reflect.DeepEqual(gots, want) {
		t.Errorf("actions = %+v\nwant %+v", gots, want)
	}
	if next != DefaultRetention-time.Hour {
		t.Errorf("next = %s, want the kept orphan's expiry", next)
	}
}

func TestBatches(t *testing.T) {
	sets := []*appsv1.StatefulSet{set("z1", "1", 3), set("z2", "2", 2)}
	got, err := batches(sets, update.Config{Canaries: "1", MaxInFlight: "2"})
	if err != nil {
		t.Fatal(err)
	}
	var names [][]string
	for _, b := range got {
		var n []string
		for _, s := range b {
			n = append(n, s.set.Name+"-"+string(rune('0'+s.ordinal)))
		}
		names = append(names, n)
	}
	want := [][]string{{"z1-2"}, {"z1-1", "z1-0"}, {"z2-1", "z2-0"}}
	if !reflect.DeepEqual(names, want) {
		t.Errorf("batches = %v, want %v", names, want)
	}
}
