package names

// The deploy's hold on instances and its pin of the BPM info.
const (
	// SchedulingGateDeploy holds the pod of an instance the deploy has not
	// started yet (a new StatefulSet's, a scale-up's): the webhook adds it,
	// the deploy controller removes it at the instance's turn, so a first
	// deploy starts instances in the director's order.
	SchedulingGateDeploy = Prefix + "deploy"
	// AnnotationBPMVersion in a pod template pins the BPM info version
	// (release images included) the deploy rolled the group to, beside
	// AnnotationResolvedVersion: rebuilt release images of an unchanged
	// configuration are a new BPM version only.
	AnnotationBPMVersion = Prefix + "bpm-version"
)
