package names

// Persistent disk resize: a StatefulSet's volumeClaimTemplates cannot
// change, so the webhook keeps them as they are on an update and records
// the sizes the user asked for; the operator grows each instance's claim
// to them, instance by instance in the deploy's order.
const (
	// AnnotationDiskSizes is on a StatefulSet: the wanted size of each
	// volumeClaimTemplate that differs from the template, as JSON
	// {"store":"2Gi"}.
	AnnotationDiskSizes = Prefix + "disk-sizes"
	// AnnotationDiskResize is on a StatefulSet: why its resize stopped, or
	// empty while it goes on.
	AnnotationDiskResize = Prefix + "disk-resize"
	// AnnotationDrainedPod is on a claim being grown: the UID of the pod
	// deleted (and so drained) before it, "-" when none ran.
	AnnotationDrainedPod = Prefix + "drained-pod"
)
