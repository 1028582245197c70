package inject

import "fmt"

// Reason is why a pod is skipped or denied, or a StatefulSet update denied. The text is readable as it is,
// and the same constant labels logs, events and the denial metric.
type Reason string

// Skip reasons: the pod is admitted unchanged.
const (
	ReasonNotLabelled       Reason = "pod has no instance-group label"
	ReasonOperatorNamespace Reason = "pod is in the operator's namespace"
)

// Deny reasons: the pod is refused with a message saying what to do; the
// StatefulSet or Job controller retries by itself.
const (
	ReasonNotGathered           Reason = "deployment not gathered yet"
	ReasonUnknownGroup          Reason = "unknown instance group"
	ReasonIndexBeyond           Reason = "instance index beyond the manifest's instances"
	ReasonBadAZIndex            Reason = "invalid az-index label"
	ReasonNoPersistentDisk      Reason = "persistent disk required but no store volume"
	ReasonNoNamedDisk           Reason = "named disk without its volume"
	ReasonReleaseImageUnknown   Reason = "release image unknown"
	ReasonInvalidPod            Reason = "pod cannot be decoded"
	ReasonScriptsWithoutProcess Reason = "lifecycle scripts without a process to run them in"
	// ReasonUntrustedSecret: a Secret carrying a deployment's labels that
	// its gathering did not write (or that was replaced since); it is
	// ignored with a warning Event, and a pod that needs it is denied.
	ReasonUntrustedSecret Reason = "Secret not written by the deployment's gathering"
	ReasonVersionGone     Reason = "accepted version deleted"
	ReasonPinnedUnknown   Reason = "pinned version not accepted"
	ReasonNoDeployment    Reason = "pod has no deployment label"
	ReasonNotAPod         Reason = "admission request is not for a pod"
	ReasonNoPodSpec       Reason = "pod has no spec"
	ReasonBadReleaseJobs  Reason = "invalid release-jobs annotation"
)

// Deny reasons of a deployment's StatefulSet update (package statefulsets).
const (
	ReasonDiskShrink  Reason = "persistent disk cannot shrink"
	ReasonDiskChanged Reason = "persistent disk changed beyond its size"
)

// Denial is an error that denies a pod's admission, with a message saying
// what to do.
type Denial struct {
	Reason  Reason
	Message string
}

func (d *Denial) Error() string { return fmt.Sprintf("%s: %s", d.Reason, d.Message) }

func deny(r Reason, format string, args ...any) *Denial {
	return &Denial{Reason: r, Message: fmt.Sprintf(format, args...)}
}

// codes are the reasons' stable CamelCase values for metric labels, where
// readable text with spaces and quotes does not belong; the text may be
// reworded, the code stays.
var codes = map[Reason]string{
	ReasonNotLabelled:           "NotLabelled",
	ReasonOperatorNamespace:     "OperatorNamespace",
	ReasonNotGathered:           "NotGathered",
	ReasonUnknownGroup:          "UnknownGroup",
	ReasonIndexBeyond:           "IndexBeyond",
	ReasonBadAZIndex:            "BadAZIndex",
	ReasonNoPersistentDisk:      "NoPersistentDisk",
	ReasonNoNamedDisk:           "NoNamedDisk",
	ReasonReleaseImageUnknown:   "ReleaseImageUnknown",
	ReasonInvalidPod:            "InvalidPod",
	ReasonScriptsWithoutProcess: "ScriptsWithoutProcess",
	ReasonUntrustedSecret:       "UntrustedSecret",
	ReasonVersionGone:           "VersionGone",
	ReasonPinnedUnknown:         "PinnedVersionUnknown",
	ReasonBadReleaseJobs:        "BadReleaseJobs",
	ReasonNoDeployment:          "NoDeploymentLabel",
	ReasonNotAPod:               "NotAPod",
	ReasonNoPodSpec:             "NoPodSpec",
	ReasonDiskShrink:            "DiskShrink",
	ReasonDiskChanged:           "DiskChanged",
}

// Code is the reason's CamelCase value for metrics.
func (r Reason) Code() string { return codes[r] }
