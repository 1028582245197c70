package disks_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/bosh-injector/bosh-injector/gather/client/disks"
	"github.com/bosh-injector/bosh-injector/gather/names"
)

// named makes p a named disk's claim, annotated as its template is.
func named(p *corev1.PersistentVolumeClaim, disk string) *corev1.PersistentVolumeClaim {
	p.Annotations[names.AnnotationDiskName] = disk
	return p
}

func claim(name string, orphaned bool, at string) *corev1.PersistentVolumeClaim {
	p := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: map[string]string{names.LabelDeployment: "d"}},
		Status:     corev1.PersistentVolumeClaimStatus{Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
	}
	if orphaned {
		p.Labels[names.LabelOrphaned] = "true"
		p.Annotations = map[string]string{names.AnnotationOrphanedAt: at, names.AnnotationOrphanedInstance: "db/" + name + " (2)"}
	}
	return p
}

func TestOrphanedAndDelete(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientBuilder().WithObjects(
		claim("store-d-db-2", true, "2026-11-26T10:00:00Z"),
		claim("store-d-db-3", true, "2026-11-25T10:00:00Z"),
		claim("store-d-db-0", false, ""),
		named(claim("disk-blob-store-d-db-1", true, "2026-11-26T11:00:00Z"), "blob_store"),
	).Build()
	list, err := disks.Orphaned(ctx, c, "ns")
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := disks.Print(&out, list, false); err != nil {
		t.Fatal(err)
	}
	want := `DISK                    NAME        SIZE  DEPLOYMENT  INSTANCE                       ORPHANED AT
store-d-db-3            -           1Gi   d           db/store-d-db-3 (2)            2026-11-25T10:00:00Z
store-d-db-2            -           1Gi   d           db/store-d-db-2 (2)            2026-11-26T10:00:00Z
disk-blob-store-d-db-1  blob_store  1Gi   d           db/disk-blob-store-d-db-1 (2)  2026-11-26T11:00:00Z

3 disks
`
	if out.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", out.String(), want)
	}

	if err := disks.Delete(ctx, c, "ns", "store-d-db-0"); err == nil || !strings.Contains(err.Error(), "not orphaned") {
		t.Errorf("deleting a mounted disk: %v", err)
	}
	if err := disks.Delete(ctx, c, "ns", "store-d-db-2"); err != nil {
		t.Fatal(err)
	}
	var p corev1.PersistentVolumeClaim
	if err := c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "store-d-db-2"}, &p); err == nil {
		t.Error("the orphaned disk is still there")
	}
}
