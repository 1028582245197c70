package names

// Day-2 operations on a running instance (`stop`, `start`, `restart`): the
// desired state of its processes, on its pod, which the pod's launchers
// read through a downward API volume (contract.DesiredDir), so it reaches
// them without a restart and outlives their containers' restarts.
const (
	// AnnotationDesiredState is "stopped" on the pod of a stopped
	// instance; absent or anything else, its processes run.
	AnnotationDesiredState = Prefix + "desired-state"
	DesiredStopped         = "stopped"
	// AnnotationSkipDrain "true" with a stop skips the jobs' drain
	// scripts, as `bosh stop --skip-drain`.
	AnnotationSkipDrain = Prefix + "skip-drain"
)
