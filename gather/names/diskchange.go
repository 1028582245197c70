package names

// Adding or removing a persistent disk of a running group: a
// StatefulSet's volumeClaimTemplates cannot change, so the webhook keeps
// them and records the templates the user applied; the disk controller
// replaces the StatefulSet (deleted with its pods and claims orphaned,
// created again with the wanted templates), then replaces each instance's
// pod in the deploy's order so that it mounts the new set of disks.
const (
	// AnnotationDiskTemplates is on a StatefulSet: the volumeClaimTemplates
	// the user applied, as JSON, when they add or remove a disk.
	AnnotationDiskTemplates = Prefix + "disk-templates"
	// AnnotationDiskRemount is on a StatefulSet created again with another
	// set of disks: "true" until each of its pods mounts them.
	AnnotationDiskRemount = Prefix + "disk-remount"
	// LabelDiskChange is "true" on the ConfigMap that holds a StatefulSet
	// between its deletion and its creation, so that an operator restarted
	// in between creates it.
	LabelDiskChange = Prefix + "disk-change"
	// AnnotationDiskChangeFrom is on that ConfigMap: the UID of the
	// StatefulSet being replaced.
	AnnotationDiskChangeFrom = Prefix + "disk-change-from"
)

// DiskChangeRecord names the ConfigMap holding StatefulSet set while it is
// replaced.
func DiskChangeRecord(set string) string { return "disk-change-" + set }
