package inject

import (
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/bosh-injector/bosh-injector/gather/model/bpm"
	"github.com/bosh-injector/bosh-injector/gather/names"
)

// mountNamedDisks mounts each named disk of the group (`persistent_disks`,
// a volumeClaimTemplate names.NamedDiskVolume each) at
// names.NamedDisksDir/<name> in every container running job code (those
// mounting the jobs volume): the agent links the disk's device there on
// the VM, where every job and script sees it. The claim is a filesystem
// already, as a container may not format or mount a device. A pod without
// a disk's volume is denied, naming it.
func mountNamedDisks(info *bpm.Info, lists ...[]corev1.Container) []partDenial {
	var denials []partDenial
	for _, d := range info.NamedDisks {
		volume := names.NamedDiskVolume(d)
		denials = append(denials, partDenial{without: volume, Denial: deny(ReasonNoNamedDisk, "instance group '%s' has the persistent disk '%s': add a volumeClaimTemplate named '%s' to the StatefulSet (bosh-injector objects prints it)", info.InstanceGroup, d, volume)})
	}
	for _, list := range lists {
		for i := range list {
			c := &list[i]
			if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == VolumeJobs }) {
				continue
			}
			for _, d := range info.NamedDisks {
				c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: names.NamedDiskVolume(d), MountPath: names.NamedDisksDir + d})
			}
		}
	}
	return denials
}
