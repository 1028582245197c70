package rollout

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bosh-injector/bosh-injector/gather/model/update"
	"github.com/bosh-injector/bosh-injector/gather/names"
	"github.com/bosh-injector/bosh-injector/gather/operator/podstate"
	"github.com/bosh-injector/bosh-injector/gather/operator/statefulsets"
	"github.com/bosh-injector/bosh-injector/gather/operator/status"
)

// version is a group's accepted version as its pod templates pin it.
type version struct{ resolved, bpm string }

// group advances one group's update.
func (d *run) group(ctx context.Context, g update.Group) (outcome, error) {
	label := names.LabelValue(g.Name)
	sets := d.sets[label]
	// Unneeded instances go first, as the director deletes them before
	// updating the rest; a scale-down during the update or after the
	// group's is done is taken when seen.
	if o, busy, err := d.shrink(ctx, g, sets); err != nil || busy {
		return o, err
	}
	gs := d.state.Groups[g.Name]
	if gs != nil && (gs.Phase == groupDone || gs.Phase == groupUnchanged) {
		return outcome{done: true}, nil
	}
	resolved, ok := d.versions[label]
	if !ok {
		return outcome{done: true}, nil
	}
	want := version{resolved: strconv.Itoa(resolved)}
	if n, ok := d.bpm[label]; ok {
		want.bpm = strconv.Itoa(n)
	}
	if gs == nil {
		return d.start(ctx, g, sets, want, nil)
	}
	if groupGrown(gs, sets) {
		// Scaled up during its update (the StatefulSets applied after the
		// manifest was accepted): the new instances' held pods count as
		// unavailable, so the StatefulSet controller would replace no
		// more of that AZ. The rest is planned again, the new instances
		// first, as the director takes new and changed instances of a
		// group in the same canary and max_in_flight steps.
		return d.start(ctx, g, sets, want, gs)
	}
	return d.advance(ctx, g, gs, sets)
}

// groupGrown says whether a StatefulSet of the update has more replicas than
// the update planned for.
func groupGrown(gs *status.Group, sets []*appsv1.StatefulSet) bool {
	for _, s := range sets {
		if i := slices.Index(gs.Sets, s.Name); i >= 0 && int(ptr.Deref(s.Spec.Replicas, 1)) > gs.Replicas[i] {
			return true
		}
	}
	return false
}

// groupHeld is how many of the instances the update replaces in AZ az are
// still to replace: all but those of its steps before the last released
// one, which it saw running at the new version.
func groupHeld(gs *status.Group, az int) int {
	replaced := max(released(gs.Steps, len(gs.Sets), gs.Step-1)[az]-groupFresh(gs, az), 0)
	return max(gs.Updating[az]-replaced, 0)
}

// atVersion says whether a StatefulSet's template pins version want; a
// template without an annotation was created against the first.
func atVersion(s *appsv1.StatefulSet, want version) bool {
	pinned := func(key, v string) bool {
		current, has := s.Spec.Template.Annotations[key]
		return current == v || (!has && v == "1")
	}
	return pinned(names.AnnotationResolvedVersion, want.resolved) && (want.bpm == "" || pinned(names.AnnotationBPMVersion, want.bpm))
}

// observed says whether a StatefulSet's status is of its current spec.
func observed(s *appsv1.StatefulSet) bool {
	return s.Status.ObservedGeneration >= s.Generation && s.Status.UpdateRevision != ""
}

// rolledOut says whether every pod of an observed StatefulSet runs its
// template's revision, as its controller counts it (the current revision
// becomes the update revision once every pod is updated and Ready): a
// partition a failed deploy left, or pods not Ready, are not.
func rolledOut(s *appsv1.StatefulSet) bool {
	return s.Status.CurrentRevision == s.Status.UpdateRevision && s.Status.UpdatedReplicas >= s.Status.Replicas
}

// start plans the group's update from what runs, not only from its
// templates: the instances of a StatefulSet not at version or not rolled
// out are replaced, the ones the deploys have not started yet are started.
// It pins the templates to want, holding the replaced instances with the
// partition, and releases the first step. Planning again over prev, the
// instances prev saw running at want are not replaced again; those of its
// last released step are, being not seen yet.
func (d *run) start(ctx context.Context, g update.Group, sets []*appsv1.StatefulSet, want version, prev *status.Group) (outcome, error) {
	if slices.ContainsFunc(sets, func(s *appsv1.StatefulSet) bool { return !observed(s) }) {
		// What runs is known once the StatefulSet controller saw the spec.
		return outcome{wait: poll}, nil
	}
	if prev != nil {
		d.Log.Info("instance group scaled during its update: planning the rest again", "namespace", d.manifest.Namespace, "group", g.Name)
	}
	gs := &status.Group{Phase: groupUpdating, Step: -1, Released: stamp(d.now)}
	var sizes []int
	for _, s := range sets {
		if s.Spec.UpdateStrategy.Type == appsv1.OnDeleteStatefulSetStrategyType {
			d.fail(g.Name, fmt.Sprintf("StatefulSet %s updates on delete only: the deploy cannot release its instances; use the RollingUpdate strategy", s.Name))
			return outcome{}, nil
		}
		replicas := int(ptr.Deref(s.Spec.Replicas, 1))
		started := min(d.state.Instances[s.Name], replicas)
		updating := 0
		if !atVersion(s, want) || !rolledOut(s) {
			updating = started
		}
		if prev != nil {
			if i := slices.Index(prev.Sets, s.Name); i >= 0 {
				updating = min(groupHeld(prev, i), started)
			}
		}
		gs.Sets = append(gs.Sets, s.Name)
		gs.Replicas = append(gs.Replicas, replicas)
		gs.Updating = append(gs.Updating, updating)
		gs.Started = append(gs.Started, started)
		sizes = append(sizes, updating+replicas-started)
	}
	steps, err := g.Update.Steps(sizes)
	if err != nil {
		d.fail(g.Name, fmt.Sprintf("instance group '%s': %v", g.Name, err))
		return outcome{}, nil
	}
	gs.Steps = steps
	for i, s := range sets {
		pin := &want
		if atVersion(s, want) {
			// Pinned already, maybe implicitly: a new annotation would
			// be a new revision, replacing every pod.
			if partition(s) == gs.Updating[i] {
				continue
			}
			pin = nil
		}
		if err := d.patch(ctx, s, pin, gs.Updating[i]); err != nil {
			return outcome{}, err
		}
	}
	d.state.Groups[g.Name] = gs
	if len(steps) > 0 {
		d.Log.Info("updating instance group", "namespace", d.manifest.Namespace, "group", g.Name, "version", want.resolved, "bpm", want.bpm, "steps", len(steps))
	}
	return d.advance(ctx, g, gs, sets)
}

func partition(s *appsv1.StatefulSet) int {
	if s.Spec.UpdateStrategy.RollingUpdate == nil {
		return 0
	}
	return int(ptr.Deref(s.Spec.UpdateStrategy.RollingUpdate.Partition, 0))
}

// patch pins a StatefulSet's template to want, when given, and sets its
// partition.
func (d *run) patch(ctx context.Context, s *appsv1.StatefulSet, want *version, partition int) error {
	p := client.MergeFrom(s.DeepCopy())
	if want != nil {
		if s.Spec.Template.Annotations == nil {
			s.Spec.Template.Annotations = map[string]string{}
		}
		s.Spec.Template.Annotations[names.AnnotationResolvedVersion] = want.resolved
		if want.bpm != "" {
			s.Spec.Template.Annotations[names.AnnotationBPMVersion] = want.bpm
		}
	}
	if s.Spec.UpdateStrategy.RollingUpdate == nil {
		s.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateStatefulSetStrategy{}
	}
	s.Spec.UpdateStrategy.RollingUpdate.Partition = ptr.To(int32(partition))
	if err := d.Client.Patch(ctx, s, p); err != nil {
		return fmt.Errorf("updating StatefulSet %s: %w", s.Name, err)
	}
	return nil
}

// released is how many instances of each AZ steps[0..upTo] release.
func released(steps []update.Step, azs, upTo int) []int {
	out := make([]int, azs)
	for i := 0; i <= upTo && i < len(steps); i++ {
		out[steps[i].AZ] += steps[i].N
	}
	return out
}

// groupOrdinal is the pod ordinal of the j-th instance (0-based) a group's
// update takes in AZ az: the new ones lowest first, then the replaced ones
// highest first. New ones go first as the StatefulSet controller replaces
// no pod while one (a held one) is unavailable beyond maxUnavailable.
func groupOrdinal(gs *status.Group, az, j int) int {
	if n := groupFresh(gs, az); j < n {
		return gs.Started[az] + j
	}
	return gs.Updating[az] - 1 - (j - groupFresh(gs, az))
}

// groupFresh is how many new instances the update starts in AZ az.
func groupFresh(gs *status.Group, az int) int { return max(gs.Replicas[az]-gs.Started[az], 0) }

// advance checks the instances of the released step and, when they are
// running and watched, releases the next step; after the last, it waits
// for every instance of the group to run.
func (d *run) advance(ctx context.Context, g update.Group, gs *status.Group, sets []*appsv1.StatefulSet) (outcome, error) {
	byName := map[string]*appsv1.StatefulSet{}
	for _, s := range sets {
		byName[s.Name] = s
	}
	if gs.Step >= 0 {
		o, failure, err := d.check(ctx, g, gs, byName)
		if err != nil || failure != "" {
			if failure != "" {
				d.fail(g.Name, failure)
			}
			return outcome{}, err
		}
		if !o.done {
			return o, nil
		}
	}
	if gs.Step == len(gs.Steps)-1 {
		o, failure, err := d.settle(ctx, g, gs, byName)
		if failure != "" {
			d.fail(g.Name, failure)
		}
		if o.done {
			gs.Phase = groupDone
			if len(gs.Steps) == 0 {
				gs.Phase = groupUnchanged
			}
		}
		return o, err
	}
	next := gs.Steps[gs.Step+1]
	name := gs.Sets[next.AZ]
	s, ok := byName[name]
	if !ok {
		d.fail(g.Name, fmt.Sprintf("StatefulSet %s of instance group '%s' is gone", name, g.Name))
		return outcome{}, nil
	}
	// An instance drained for its disk to grow is down as a step's are:
	// the next step waits for it, or max_in_flight would be exceeded. The
	// disk controller decides no drain of the group meanwhile.
	release := d.Disruptions.Hold(d.manifest.Namespace, d.manifest.Labels[names.LabelDeployment], g.Name)
	defer release()
	if claim, err := d.draining(ctx, sets); err != nil || claim != "" {
		if claim != "" {
			d.Log.V(1).Info("waiting for a disk resize before the next step", "namespace", d.manifest.Namespace, "group", g.Name, "claim", claim)
		}
		return outcome{wait: poll}, err
	}
	before := released(gs.Steps, len(gs.Sets), gs.Step)[next.AZ]
	after := before + next.N
	n, u := groupFresh(gs, next.AZ), gs.Updating[next.AZ]
	if after > n {
		if err := d.patch(ctx, s, nil, u-min(after-n, u)); err != nil {
			return outcome{}, err
		}
	}
	// Instances scaled away meanwhile are not started.
	if started := min(gs.Started[next.AZ]+min(after, n), int(ptr.Deref(s.Spec.Replicas, 1))); started > d.state.Instances[name] {
		d.state.Instances[name] = started
		if err := d.ungate(ctx, s, started); err != nil {
			return outcome{}, err
		}
	}
	gs.Step++
	gs.Released = stamp(d.now)
	what := "batch"
	if next.Canary {
		what = "canary"
	}
	steps.WithLabelValues(what).Inc()
	var pods []string
	for j := before; j < after; j++ {
		pods = append(pods, names.PodName(name, groupOrdinal(gs, next.AZ, j)))
	}
	d.Log.Info("releasing instances", "namespace", d.manifest.Namespace, "group", g.Name, "step", what, "pods", pods)
	d.Recorder.Eventf(d.manifest, s, corev1.EventTypeNormal, status.ReasonUpdating, "Deploy", "instance group '%s': updating %s %s (step %d of %d)",
		g.Name, what, strings.Join(pods, ", "), gs.Step+1, len(gs.Steps))
	return outcome{wait: g.Update.Watch(next).Min + time.Second}, nil
}

// draining names a claim of the group whose instance the disk controller
// drained to grow it ("" when none is).
func (d *run) draining(ctx context.Context, sets []*appsv1.StatefulSet) (string, error) {
	for _, s := range sets {
		for _, name := range statefulsets.ClaimNames(s) {
			// From the API server: the disk controller's mark may be
			// newer than the cache.
			var c corev1.PersistentVolumeClaim
			err := d.APIReader.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: name}, &c)
			if client.IgnoreNotFound(err) != nil {
				return "", err
			}
			if err == nil && statefulsets.Draining(&c) {
				return name, nil
			}
		}
	}
	return "", nil
}

// check watches the instances of the group's last released step as the
// director watches an updated instance (Starter.wait_until_running): from
// the watch time's minimum it looks until its maximum for the instance
// running, its new pod Ready (every process running and post-start
// passed), counted from the new pod's creation or the step's release,
// whichever is later. Restarts and a crash loop in between do not fail it:
// only not running by the maximum does.
func (d *run) check(ctx context.Context, g update.Group, gs *status.Group, sets map[string]*appsv1.StatefulSet) (outcome, string, error) {
	step := gs.Steps[gs.Step]
	watch := g.Update.Watch(step)
	name := gs.Sets[step.AZ]
	s, ok := sets[name]
	if !ok {
		return outcome{}, fmt.Sprintf("StatefulSet %s of instance group '%s' is gone", name, g.Name), nil
	}
	if !observed(s) {
		return outcome{wait: poll}, "", nil
	}
	pods, err := d.pods(ctx, s)
	if err != nil {
		return outcome{}, "", err
	}
	after := released(gs.Steps, len(gs.Sets), gs.Step)[step.AZ]
	var ordinals []int
	for j := after - step.N; j < after; j++ {
		// Instances scaled away meanwhile are not watched.
		if o := groupOrdinal(gs, step.AZ, j); o < int(ptr.Deref(s.Spec.Replicas, 1)) {
			ordinals = append(ordinals, o)
		}
	}
	return d.watch(ctx, g.Name, s, pods, ordinals, parseStamp(gs.Released), watch, true)
}

// settle waits, after a group's last step (or for a group the deploy does
// not change), until every instance of the group runs at the accepted
// version: a deploy is done only when all do. One that does not by the
// update watch time's maximum, counted from the last step, fails it.
func (d *run) settle(ctx context.Context, g update.Group, gs *status.Group, sets map[string]*appsv1.StatefulSet) (outcome, string, error) {
	var wait time.Duration
	for i, name := range gs.Sets {
		s, ok := sets[name]
		if !ok {
			return outcome{}, fmt.Sprintf("StatefulSet %s of instance group '%s' is gone", name, g.Name), nil
		}
		if !observed(s) {
			wait = max(wait, poll)
			continue
		}
		pods, err := d.pods(ctx, s)
		if err != nil {
			return outcome{}, "", err
		}
		var ordinals []int
		for o := range min(gs.Replicas[i], int(ptr.Deref(s.Spec.Replicas, 1))) {
			ordinals = append(ordinals, o)
		}
		o, failure, err := d.watch(ctx, g.Name, s, pods, ordinals, parseStamp(gs.Released), g.Update.UpdateWatch, false)
		if err != nil || failure != "" {
			return o, failure, err
		}
		wait = max(wait, o.wait)
	}
	return outcome{done: wait == 0, wait: wait}, "", nil
}

func (d *run) pods(ctx context.Context, s *appsv1.StatefulSet) ([]corev1.Pod, error) {
	var pods corev1.PodList
	if err := d.APIReader.List(ctx, &pods, client.InNamespace(s.Namespace), client.MatchingLabels(s.Spec.Selector.MatchLabels)); err != nil {
		return nil, fmt.Errorf("listing the pods of StatefulSet %s: %w", s.Name, err)
	}
	return pods.Items, nil
}

// watch looks at the instances of ordinals of s once: done when each one's
// pod of the update revision is Ready (and, with minimum, the watch time's
// minimum has passed since the pod or since), failed when one is not by
// the maximum.
func (d *run) watch(ctx context.Context, group string, s *appsv1.StatefulSet, pods []corev1.Pod, ordinals []int, since time.Time, watch update.Watch, minimum bool) (outcome, string, error) {
	grace := time.Duration(ptr.Deref(s.Spec.Template.Spec.TerminationGracePeriodSeconds, corev1.DefaultTerminationGracePeriodSeconds)) * time.Second
	var wait time.Duration
	for _, o := range ordinals {
		podName := names.PodName(s.Name, o)
		i := slices.IndexFunc(pods, func(p corev1.Pod) bool { return p.Name == podName })
		var pod *corev1.Pod
		if i >= 0 && pods[i].Labels[appsv1.ControllerRevisionHashLabelKey] == s.Status.UpdateRevision && pods[i].DeletionTimestamp == nil {
			pod = &pods[i]
		}
		if pod == nil {
			deadline := since.Add(grace + watch.Max)
			if !d.now.Before(deadline) {
				return outcome{}, d.notRunning(ctx, group, podName, "", s, nil, watch), nil
			}
			wait = max(wait, min(poll, deadline.Sub(d.now)))
			continue
		}
		start := pod.CreationTimestamp.Time
		if start.Before(since) {
			start = since
		}
		if podstate.Ready(pod) || podstate.Stopped(pod) {
			if left := start.Add(watch.Min).Sub(d.now); minimum && left > 0 {
				wait = max(wait, left)
			}
			continue
		}
		// A post-start that failed is not run again: the director fails
		// the deploy on it at once, not at the watch time's end.
		deadline := start.Add(watch.Max)
		if !d.now.Before(deadline) || len(podstate.Failed(ctx, pod)) > 0 {
			return outcome{}, d.notRunning(ctx, group, podName, instanceName(group, pod), s, pod, watch), nil
		}
		wait = max(wait, min(poll, deadline.Sub(d.now)))
	}
	return outcome{done: wait == 0, wait: wait}, "", nil
}
