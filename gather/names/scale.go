package names

// AnnotationScaleDown is a StatefulSet's annotation recording the replicas
// a user's update asked for when it lowered them: the webhook keeps the
// replicas, and the deploy controller removes the instances above that
// count max_in_flight at a time, as a director deletes unneeded instances,
// then removes the annotation.
const AnnotationScaleDown = Prefix + "scale-down-to"
