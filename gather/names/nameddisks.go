package names

// Named persistent disks (an instance group's `persistent_disks`): each is
// a volumeClaimTemplate of its own, beside the managed disk's "store".
const (
	// NamedDiskPrefix starts a named disk's volumeClaimTemplate name; the
	// managed disk's is "store", so the two never collide.
	NamedDiskPrefix = "disk-"
	// AnnotationDiskName is on a named disk's volumeClaimTemplate (and so
	// on its claims): the disk's name in the manifest, which the template
	// name holds only as a DNS label.
	AnnotationDiskName = Prefix + "disk-name"
	// NamedDisksDir is where the agent makes named disks reachable to jobs
	// (bosh-agent's AssociateDisk links /var/vcap/instance/disks/<name> to
	// the device); the webhook mounts each disk's filesystem there.
	NamedDisksDir = "/var/vcap/instance/disks/"
)

// NamedDiskVolume is the volumeClaimTemplate (and pod volume) name of the
// named disk disk.
func NamedDiskVolume(disk string) string {
	return NamedDiskPrefix + DNS1123LabelMax(disk, 63-len(NamedDiskPrefix))
}
