package objects

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/bosh-injector/bosh-injector/gather/model/manifest"
	"github.com/bosh-injector/bosh-injector/gather/names"
)

// namedDisks are the volumeClaimTemplates of a group's `persistent_disks`,
// one per disk, sized and classed by its type as the managed disk is. The
// director attaches such a disk unformatted and the agent links
// /var/vcap/instance/disks/<name> to the device for the jobs to format and
// mount; a container may not mount, so the claim is a filesystem the
// webhook mounts at that path, which the warning says.
func (b *builder) namedDisks(g *manifest.InstanceGroup) ([]corev1.PersistentVolumeClaim, error) {
	if len(g.PersistentDisks) == 0 {
		return nil, nil
	}
	if g.Lifecycle == "errand" {
		b.warn("instance group '%s': the errand's persistent_disks are not mapped: a Job has no volumeClaimTemplates", g.Name)
		return nil, nil
	}
	byVolume := map[string]string{}
	for _, d := range g.PersistentDisks {
		volume := names.NamedDiskVolume(d.Name)
		if volume == names.NamedDiskPrefix {
			return nil, fmt.Errorf("instance group '%s': persistent_disks name '%s' has no letter or digit to name its claim with", g.Name, d.Name)
		}
		if other, ok := byVolume[volume]; ok {
			return nil, fmt.Errorf("instance group '%s': persistent_disks names '%s' and '%s' both make the claim name '%s': rename one", g.Name, other, d.Name, volume)
		}
		byVolume[volume] = d.Name
	}
	var claims []corev1.PersistentVolumeClaim
	for _, d := range g.PersistentDisks {
		size, ok := b.opts.DiskSizes[d.Type]
		if !ok {
			return nil, fmt.Errorf("instance group '%s': persistent_disks '%s' has type '%s', which the cloud config sizes and bosh-injector does not read: give its size with --disk-size %s=10Gi", g.Name, d.Name, d.Type, d.Type)
		}
		claim := b.claim(g, names.NamedDiskVolume(d.Name), "persistent_disks '"+d.Name+"' type", d.Type, size)
		claim.Annotations = map[string]string{names.AnnotationDiskName: d.Name}
		claims = append(claims, *claim)
	}
	b.warn("instance group '%s': persistent_disks are mounted as filesystems at %s<name> in every job container: the director attaches them as unformatted devices linked there for the jobs to format and mount", g.Name, names.NamedDisksDir)
	return claims, nil
}

// claim is a volumeClaimTemplate of size, with the StorageClass mapped
// from the disk type diskType ("" for the cluster's default), which the
// manifest gives at field.
func (b *builder) claim(g *manifest.InstanceGroup, name, field, diskType string, size resource.Quantity) *corev1.PersistentVolumeClaim {
	// As the API server stores it (type, volume mode, phase): the list is
	// atomic to kubectl apply, which would otherwise send it at every apply.
	claim := &corev1.PersistentVolumeClaim{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}},
			VolumeMode:  ptr.To(corev1.PersistentVolumeFilesystem),
		},
		Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending},
	}
	if diskType != "" {
		class, ok := b.opts.StorageClasses[diskType]
		if ok {
			claim.Spec.StorageClassName = ptr.To(class)
		} else {
			b.warn("instance group '%s': %s '%s' has no --storage-class-map entry: the cluster's default StorageClass is used", g.Name, field, diskType)
		}
	}
	return claim
}
