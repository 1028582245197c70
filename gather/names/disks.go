package names

// Orphaned persistent disks: a claim whose instance is gone (scaled down,
// its disk removed from the manifest, its deployment deleted) is kept, as
// the director keeps orphaned disks, and marked so that `disks --orphaned`
// lists it and the operator deletes it after the retention.
const (
	// LabelOrphaned is "true" on an orphaned PersistentVolumeClaim.
	LabelOrphaned = Prefix + "orphaned"
	// AnnotationOrphanedAt is when the claim was orphaned (RFC 3339).
	AnnotationOrphanedAt = Prefix + "orphaned-at"
	// AnnotationOrphanedInstance is the instance the claim belonged to, as
	// the director names it: "group/uuid (index)".
	AnnotationOrphanedInstance = Prefix + "orphaned-instance"
)
