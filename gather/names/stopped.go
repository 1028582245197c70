package names

// A stopped instance stays stopped when its pod is replaced (deleted,
// evicted, recreated by its StatefulSet), as a director keeps an
// instance's state in its database across VM recreation: `stop` records
// it on the deployment's manifest Secret, an annotation per instance
// keyed by its pod's name, and the webhook gives a new pod of that
// instance AnnotationDesiredState stopped. `start`, `restart` and
// `recreate` remove it, as they leave a director's instance started.
const stoppedDomain = "stopped." + Prefix

// AnnotationStopped is the manifest Secret's annotation recording that
// the instance of pod is stopped; its value is the instance's name.
func AnnotationStopped(pod string) string { return stoppedDomain + pod }
