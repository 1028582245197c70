package contract

// DesiredVolume is the downward API volume, mounted read-only at
// DesiredDir in every process container, holding the pod's day-2
// annotations (names.AnnotationDesiredState, names.AnnotationSkipDrain) as
// DesiredStateFile and SkipDrainFile. The kubelet rewrites them when the
// annotations change, so the launchers stop and start their processes
// without a pod restart.
const (
	DesiredVolume    = "bosh-injector-desired"
	DesiredDir       = "/var/vcap/bosh-injector/desired"
	DesiredStateFile = "state"
	SkipDrainFile    = "skip-drain"
)
