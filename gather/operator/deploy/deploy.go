// Package deploy is the operator's deploy controller: it takes each
// configuration version the job runner accepted (the instance groups'
// resolved versions and the manifest's update plan) to the deployment's
// StatefulSets as a BOSH director deploys: instance groups in manifest
// order (consecutive `serial: false` groups together), within a group
// canaries first and then batches of max_in_flight, AZ by AZ, each step
// released by lowering the StatefulSets' rollingUpdate.partition once the
// instances of the step before are Ready and their watch time has passed.
// An instance not Ready by its watch time's maximum, or crash-looping,
// stops the deploy: what was not updated keeps its version and keeps
// running. It touches nothing of a StatefulSet but its update strategy's
// partition and its pod template's resolved-version annotation.
package deploy

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/bosh-injector/bosh-injector/gather/names"
	"github.com/bosh-injector/bosh-injector/gather/operator/runner"
	"github.com/bosh-injector/bosh-injector/gather/update"
)

// Event reasons; the failure reasons are also the deploy's status message
// prefix.
const (
	// ReasonUpdating: a step of an instance group's update was released.
	ReasonUpdating = "UpdatingInstances"
	// ReasonDeployed: every instance group is on the accepted version.
	ReasonDeployed = "Deployed"
	// ReasonDeployFailed: an instance was not running after its update;
	// the deploy stopped there.
	ReasonDeployFailed = "DeployFailed"
)

// Phases of a deploy, the values of the manifest Secret's deploy-state
// label.
const (
	PhaseDeploying = "Deploying"
	PhaseDeployed  = "Deployed"
	PhaseFailed    = "Failed"
)

// Phases of an instance group in a deploy.
const (
	groupUpdating  = "Updating"
	groupDone      = "Done"
	groupUnchanged = "Unchanged"
)

// poll is how often instances being watched are checked: a container's
// restarts change its pod, not its StatefulSet, which is what is watched.
const poll = 2 * time.Second

// Status is the JSON of the manifest Secret's deploy annotation.
type Status struct {
	// Target identifies the configuration version deployed: the resolved
	// versions and the update plan.
	Target string `json:"target"`
	// Retry is the retry annotation's value this attempt started with.
	Retry string `json:"retry,omitempty"`
	Phase string `json:"phase"`
	// Step says where the deploy is: group, canary or batch, instances.
	Step    string `json:"step,omitempty"`
	Updated int    `json:"updated"`
	Total   int    `json:"total"`
	Message string `json:"message,omitempty"`
	// Groups are the groups the deploy reached, by name.
	Groups  map[string]*Group `json:"groups,omitempty"`
	Started string            `json:"started,omitempty"`
	// Finished is when the deploy ended, deployed or failed.
	Finished string `json:"finished,omitempty"`
}

// Group is an instance group's update in a deploy.
type Group struct {
	Phase string `json:"phase"`
	// Sets are the group's StatefulSets in AZ order, Replicas their sizes
	// when the update started, Steps the update's steps over them.
	Sets     []string      `json:"sets,omitempty"`
	Replicas []int         `json:"replicas,omitempty"`
	Steps    []update.Step `json:"steps,omitempty"`
	// Step is the last released step, -1 before the first.
	Step int `json:"step"`
	// Released is when Step was released (RFC 3339, nanoseconds).
	Released string `json:"released,omitempty"`
}

// Reconciler deploys manifest Secrets' accepted configuration versions.
type Reconciler struct {
	Client client.Client
	// APIReader reads the manifest Secret (the deploy resumes from what it
	// last wrote), pods and events, which the manager does not cache.
	APIReader client.Reader
	Recorder  events.EventRecorder
	Log       logr.Logger
	// Now is the clock, time.Now when nil.
	Now func() time.Time
}

// SetupWithManager registers the controller: it follows manifest Secrets
// (the runner's status names the versions to deploy) and the StatefulSets
// of their deployments, whose status changes as pods become Ready.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("deploy").
		For(&corev1.Secret{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetLabels()[names.LabelDeployment] != "" && o.GetAnnotations()[names.AnnotationStatus] != ""
		}))).
		Watches(&appsv1.StatefulSet{}, handler.EnqueueRequestsFromMapFunc(r.manifestsOf)).
		Complete(r)
}

// manifestsOf maps a StatefulSet to the manifest Secrets of its deployment.
func (r *Reconciler) manifestsOf(ctx context.Context, o client.Object) []reconcile.Request {
	sts, ok := o.(*appsv1.StatefulSet)
	if !ok {
		return nil
	}
	deployment := sts.Spec.Template.Labels[names.LabelDeployment]
	if deployment == "" {
		return nil
	}
	reqs, err := runner.ManifestRequests(ctx, r.Client, sts.Namespace, deployment)
	if err != nil {
		r.Log.Error(err, "listing manifest Secrets")
	}
	return reqs
}

// StatusOf reads a manifest Secret's deploy annotation.
func StatusOf(s *corev1.Secret) Status {
	var st Status
	_ = json.Unmarshal([]byte(s.Annotations[names.AnnotationDeploy]), &st)
	return st
}

// Of reads a manifest Secret's deploy annotation and says whether it is the
// deploy of the versions the runner accepted last.
func Of(s *corev1.Secret) (Status, bool) {
	st := StatusOf(s)
	return st, st.Target == target(runner.StatusOf(s))
}

// target identifies a configuration version: what the runner accepted.
func target(st runner.Status) string {
	data, _ := json.Marshal(struct {
		Versions map[string]int
		Plan     update.Plan
	}{st.Versions, st.Plan})
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:8])
}

// Reconcile advances one deployment's deploy as far as it can go now.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var manifest corev1.Secret
	if err := r.APIReader.Get(ctx, req.NamespacedName, &manifest); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	accepted := runner.StatusOf(&manifest)
	if manifest.Data[names.ManifestKey] == nil || len(accepted.Versions) == 0 || accepted.Plan == nil {
		return reconcile.Result{}, nil
	}
	deployment := manifest.Labels[names.LabelDeployment]
	now := r.now()
	prev := StatusOf(&manifest)
	st := prev
	retry := manifest.Annotations[names.AnnotationRetryDeploy]
	switch t := target(accepted); {
	case st.Target != t:
		st = Status{Target: t, Retry: retry, Phase: PhaseDeploying, Groups: map[string]*Group{}, Started: stamp(now)}
	case st.Retry != retry && st.Phase == PhaseFailed:
		// A retry watches the failed step's instances again from now.
		st.Retry, st.Phase, st.Message, st.Finished = retry, PhaseDeploying, "", ""
		for _, g := range st.Groups {
			if g.Phase == groupUpdating {
				g.Released = stamp(now)
			}
		}
	}
	if st.Groups == nil {
		st.Groups = map[string]*Group{}
	}
	var result reconcile.Result
	if st.Phase == PhaseDeploying {
		sets, err := r.statefulSets(ctx, manifest.Namespace, deployment)
		if err != nil {
			return reconcile.Result{}, err
		}
		d := &run{Reconciler: r, manifest: &manifest, versions: accepted.Versions, sets: sets, status: &st, now: now}
		wait, err := d.deploy(ctx, accepted.Plan)
		if err != nil {
			return reconcile.Result{}, err
		}
		result.RequeueAfter = wait
	}
	return result, r.setStatus(ctx, &manifest, prev, st)
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func parseStamp(s string) time.Time {
	t, _ := time.Parse(time.RFC3339Nano, s)
	return t
}

// statefulSets are the deployment's StatefulSets by instance group label
// value, in AZ order. Users label pod templates with BOSH names as they
// are, so labels are compared after sanitizing.
func (r *Reconciler) statefulSets(ctx context.Context, namespace, deployment string) (map[string][]*appsv1.StatefulSet, error) {
	var list appsv1.StatefulSetList
	if err := r.Client.List(ctx, &list, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("listing the StatefulSets of deployment %q: %w", deployment, err)
	}
	out := map[string][]*appsv1.StatefulSet{}
	for i := range list.Items {
		s := &list.Items[i]
		l := s.Spec.Template.Labels
		if names.LabelValue(l[names.LabelDeployment]) != names.LabelValue(deployment) || l[names.LabelInstanceGroup] == "" {
			continue
		}
		g := names.LabelValue(l[names.LabelInstanceGroup])
		out[g] = append(out[g], s)
	}
	for _, sets := range out {
		slices.SortFunc(sets, func(a, b *appsv1.StatefulSet) int {
			ai, _ := strconv.Atoi(a.Spec.Template.Labels[names.LabelAZIndex])
			bi, _ := strconv.Atoi(b.Spec.Template.Labels[names.LabelAZIndex])
			return cmp.Or(ai-bi, strings.Compare(a.Name, b.Name))
		})
	}
	return out, nil
}

// setStatus writes st to the manifest Secret when it changed, with the
// labels `kubectl get` shows; the write fails on a concurrent one, so a
// reconcile that read an older deploy retries instead of undoing it.
func (r *Reconciler) setStatus(ctx context.Context, manifest *corev1.Secret, prev, st Status) error {
	stepLabel := ""
	if st.Phase == PhaseDeploying {
		stepLabel = names.FreeLabelValue(st.Step)
	}
	data, err := json.Marshal(st)
	if err != nil {
		return err
	}
	old, _ := json.Marshal(prev)
	if string(data) == string(old) && manifest.Labels[names.LabelDeployState] == st.Phase && manifest.Labels[names.LabelDeployStep] == stepLabel {
		return nil
	}
	patch := client.MergeFromWithOptions(manifest.DeepCopy(), client.MergeFromWithOptimisticLock{})
	manifest.Annotations[names.AnnotationDeploy] = string(data)
	manifest.Labels[names.LabelDeployState] = st.Phase
	if stepLabel == "" {
		delete(manifest.Labels, names.LabelDeployStep)
	} else {
		manifest.Labels[names.LabelDeployStep] = stepLabel
	}
	if err := r.Client.Patch(ctx, manifest, patch); err != nil {
		if apierrors.IsConflict(err) {
			return fmt.Errorf("recording the deploy of %s (retried): %w", manifest.Name, err)
		}
		return err
	}
	return nil
}

// run is one pass of a deploy.
type run struct {
	*Reconciler
	manifest *corev1.Secret
	versions map[string]int
	sets     map[string][]*appsv1.StatefulSet
	status   *Status
	now      time.Time
}

// outcome is where a group's update stands after a pass.
type outcome struct {
	done bool
	// wait is when to look again, while not done.
	wait time.Duration
}

// deploy takes the plan's stages in order, a serial stage's groups one
// after another, a parallel stage's all at once; it stops at the first
// stage not done, and at a failure.
func (d *run) deploy(ctx context.Context, plan update.Plan) (time.Duration, error) {
	defer d.progress(plan)
	for _, stage := range plan.Stages() {
		var wait time.Duration
		for _, g := range stage {
			o, err := d.group(ctx, g)
			if err != nil || d.status.Phase == PhaseFailed {
				return 0, err
			}
			if o.done {
				continue
			}
			if wait == 0 || o.wait < wait {
				wait = o.wait
			}
			if g.Update.Serial {
				break
			}
		}
		if wait > 0 {
			return wait, nil
		}
	}
	d.status.Phase, d.status.Finished = PhaseDeployed, stamp(d.now)
	d.Log.Info("deployed", "namespace", d.manifest.Namespace, "deployment", d.manifest.Labels[names.LabelDeployment])
	d.Recorder.Eventf(d.manifest, nil, corev1.EventTypeNormal, ReasonDeployed, "Deploy", "every instance group is on its accepted version")
	deploys.WithLabelValues(ReasonDeployed).Inc()
	return 0, nil
}

// group advances one group's update.
func (d *run) group(ctx context.Context, g update.Group) (outcome, error) {
	label := names.LabelValue(g.Name)
	gs := d.status.Groups[g.Name]
	if gs != nil && (gs.Phase == groupDone || gs.Phase == groupUnchanged) {
		return outcome{done: true}, nil
	}
	version, ok := d.versions[label]
	if !ok {
		return outcome{done: true}, nil
	}
	sets := d.sets[label]
	if gs == nil {
		want := strconv.Itoa(version)
		changed := slices.ContainsFunc(sets, func(s *appsv1.StatefulSet) bool { return !atVersion(s, want) })
		if !changed {
			d.status.Groups[g.Name] = &Group{Phase: groupUnchanged}
			return outcome{done: true}, nil
		}
		return d.start(ctx, g, sets, want)
	}
	return d.advance(ctx, g, gs, sets)
}

// atVersion says whether a StatefulSet's template names resolved version
// want; a template without the annotation was created against the first.
func atVersion(s *appsv1.StatefulSet, want string) bool {
	current, has := s.Spec.Template.Annotations[names.AnnotationResolvedVersion]
	return current == want || (!has && want == "1")
}

// start holds the group's StatefulSets at their current instances (the
// partition at their size) while their templates take the new version,
// then the first step is released on the next pass.
func (d *run) start(ctx context.Context, g update.Group, sets []*appsv1.StatefulSet, want string) (outcome, error) {
	gs := &Group{Phase: groupUpdating, Step: -1}
	for _, s := range sets {
		if s.Spec.UpdateStrategy.Type == appsv1.OnDeleteStatefulSetStrategyType {
			d.fail(g.Name, fmt.Sprintf("StatefulSet %s updates on delete only: the deploy cannot release its instances; use the RollingUpdate strategy", s.Name))
			return outcome{}, nil
		}
		gs.Sets = append(gs.Sets, s.Name)
		gs.Replicas = append(gs.Replicas, int(ptr.Deref(s.Spec.Replicas, 1)))
	}
	steps, err := g.Update.Steps(gs.Replicas)
	if err != nil {
		d.fail(g.Name, fmt.Sprintf("instance group '%s': %v", g.Name, err))
		return outcome{}, nil
	}
	gs.Steps = steps
	for i, s := range sets {
		if err := d.patch(ctx, s, want, gs.Replicas[i]); err != nil {
			return outcome{}, err
		}
	}
	d.status.Groups[g.Name] = gs
	d.Log.Info("updating instance group", "namespace", d.manifest.Namespace, "group", g.Name, "version", want, "steps", len(steps))
	return d.advance(ctx, g, gs, sets)
}

// patch sets a StatefulSet's template version and partition.
func (d *run) patch(ctx context.Context, s *appsv1.StatefulSet, want string, partition int) error {
	p := client.MergeFrom(s.DeepCopy())
	if want != "" {
		if s.Spec.Template.Annotations == nil {
			s.Spec.Template.Annotations = map[string]string{}
		}
		s.Spec.Template.Annotations[names.AnnotationResolvedVersion] = want
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

// advance checks the instances of the released step and, when they are
// running and watched, releases the next step.
func (d *run) advance(ctx context.Context, g update.Group, gs *Group, sets []*appsv1.StatefulSet) (outcome, error) {
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
		gs.Phase = groupDone
		return outcome{done: true}, nil
	}
	next := gs.Steps[gs.Step+1]
	name := gs.Sets[next.AZ]
	s, ok := byName[name]
	if !ok {
		d.fail(g.Name, fmt.Sprintf("StatefulSet %s of instance group '%s' is gone", name, g.Name))
		return outcome{}, nil
	}
	partition := gs.Replicas[next.AZ] - released(gs.Steps, len(gs.Sets), gs.Step+1)[next.AZ]
	if err := d.patch(ctx, s, "", max(partition, 0)); err != nil {
		return outcome{}, err
	}
	gs.Step++
	gs.Released = stamp(d.now)
	what := "batch"
	if next.Canary {
		what = "canary"
	}
	steps.WithLabelValues(what).Inc()
	ordinals := instances(s.Name, partition, partition+next.N)
	d.Log.Info("releasing instances", "namespace", d.manifest.Namespace, "group", g.Name, "step", what, "pods", ordinals)
	d.Recorder.Eventf(d.manifest, s, corev1.EventTypeNormal, ReasonUpdating, "Deploy", "instance group '%s': updating %s %s (step %d of %d)",
		g.Name, what, strings.Join(ordinals, ", "), gs.Step+1, len(gs.Steps))
	return outcome{wait: g.Update.Watch(next).Min + time.Second}, nil
}

// instances are the pod names of ordinals [from, to) of a StatefulSet.
func instances(set string, from, to int) []string {
	var out []string
	for o := to - 1; o >= from; o-- {
		out = append(out, fmt.Sprintf("%s-%d", set, o))
	}
	return out
}

// check watches the instances of the group's last released step as the
// director watches an updated instance: running (Ready) once the watch
// time's minimum has passed, failed when not by its maximum, counted from
// the new pod's creation (or the step's release, plus the old pod's grace
// period to stop, while there is no new pod). A crash-looping container
// fails it at once.
func (d *run) check(ctx context.Context, g update.Group, gs *Group, sets map[string]*appsv1.StatefulSet) (outcome, string, error) {
	step := gs.Steps[gs.Step]
	watch := g.Update.Watch(step)
	name := gs.Sets[step.AZ]
	s, ok := sets[name]
	if !ok {
		return outcome{}, fmt.Sprintf("StatefulSet %s of instance group '%s' is gone", name, g.Name), nil
	}
	if s.Status.ObservedGeneration < s.Generation || s.Status.UpdateRevision == "" {
		return outcome{wait: poll}, "", nil
	}
	upper := gs.Replicas[step.AZ] - released(gs.Steps, len(gs.Sets), gs.Step-1)[step.AZ]
	lower := gs.Replicas[step.AZ] - released(gs.Steps, len(gs.Sets), gs.Step)[step.AZ]
	replicas := int(ptr.Deref(s.Spec.Replicas, 1))
	var pods corev1.PodList
	if err := d.APIReader.List(ctx, &pods, client.InNamespace(s.Namespace), client.MatchingLabels(s.Spec.Selector.MatchLabels)); err != nil {
		return outcome{}, "", fmt.Errorf("listing the pods of StatefulSet %s: %w", s.Name, err)
	}
	released := parseStamp(gs.Released)
	grace := time.Duration(ptr.Deref(s.Spec.Template.Spec.TerminationGracePeriodSeconds, corev1.DefaultTerminationGracePeriodSeconds)) * time.Second
	var wait time.Duration
	for o := max(lower, 0); o < min(upper, replicas); o++ {
		podName := fmt.Sprintf("%s-%d", s.Name, o)
		i := slices.IndexFunc(pods.Items, func(p corev1.Pod) bool { return p.Name == podName })
		var pod *corev1.Pod
		if i >= 0 && pods.Items[i].Labels[appsv1.ControllerRevisionHashLabelKey] == s.Status.UpdateRevision && pods.Items[i].DeletionTimestamp == nil {
			pod = &pods.Items[i]
		}
		if pod == nil {
			deadline := released.Add(grace + watch.Max)
			if !d.now.Before(deadline) {
				return outcome{}, d.notRunning(ctx, g.Name, podName, "", s, nil, watch), nil
			}
			wait = max(wait, min(poll, deadline.Sub(d.now)))
			continue
		}
		start := pod.CreationTimestamp.Time
		if start.Before(released) {
			start = released
		}
		if crashLooping(pod) {
			return outcome{}, d.notRunning(ctx, g.Name, podName, instanceName(g.Name, pod), s, pod, watch), nil
		}
		if ready(pod) {
			if left := start.Add(watch.Min).Sub(d.now); left > 0 {
				wait = max(wait, left)
			}
			continue
		}
		deadline := start.Add(watch.Max)
		if !d.now.Before(deadline) {
			return outcome{}, d.notRunning(ctx, g.Name, podName, instanceName(g.Name, pod), s, pod, watch), nil
		}
		wait = max(wait, min(poll, deadline.Sub(d.now)))
	}
	return outcome{done: wait == 0, wait: wait}, "", nil
}

// instanceName is the director's name of an instance: group/index.
func instanceName(group string, pod *corev1.Pod) string {
	if i, ok := pod.Labels[names.LabelInstanceIndex]; ok {
		return group + "/" + i
	}
	return group
}

func ready(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// crashLooping says whether the kubelet is backing off restarting a
// container of pod; notRunning names the container.
func crashLooping(pod *corev1.Pod) bool {
	return slices.ContainsFunc(append(slices.Clone(pod.Status.InitContainerStatuses), pod.Status.ContainerStatuses...), func(cs corev1.ContainerStatus) bool {
		return cs.State.Waiting != nil && cs.State.Waiting.Reason == "CrashLoopBackOff"
	})
}

// notRunning is the director's error for an instance not running after its
// update, with why: the containers not ready, their last output (the
// termination message, which is the end of the log for injected
// containers), else the pod's last warning (a failing readiness probe
// says which post-start failed and its output), else the StatefulSet's
// (a pod the webhook denied).
func (d *run) notRunning(ctx context.Context, group, podName, instance string, s *appsv1.StatefulSet, pod *corev1.Pod, watch update.Watch) string {
	if instance == "" {
		instance = group
	}
	msg := fmt.Sprintf("'%s (%s)' is not running after update.", instance, podName)
	if pod == nil {
		msg += fmt.Sprintf(" No pod of the new version within %s.", watch.Max+time.Duration(ptr.Deref(s.Spec.Template.Spec.TerminationGracePeriodSeconds, 30))*time.Second)
		if e := d.lastWarning(ctx, s.Namespace, s.Name, string(s.UID)); e != "" {
			msg += " " + e
		}
		return msg
	}
	var failing, output []string
	for _, cs := range append(slices.Clone(pod.Status.InitContainerStatuses), pod.Status.ContainerStatuses...) {
		if cs.Ready || (cs.State.Terminated != nil && cs.State.Terminated.ExitCode == 0) {
			continue
		}
		failing = append(failing, cs.Name)
		for _, t := range []*corev1.ContainerStateTerminated{cs.State.Terminated, cs.LastTerminationState.Terminated} {
			if t != nil && t.ExitCode != 0 {
				output = append(output, fmt.Sprintf("%s exited with %d: %s", cs.Name, t.ExitCode, lastLines(t.Message)))
				break
			}
		}
	}
	if len(failing) > 0 {
		msg += " Review logs for failed jobs: " + strings.Join(failing, ", ")
	}
	if len(output) > 0 {
		msg += ". " + strings.Join(output, "; ")
	} else if e := d.lastWarning(ctx, pod.Namespace, pod.Name, string(pod.UID)); e != "" {
		msg += ". " + e
	} else {
		msg += fmt.Sprintf(". Not Ready within %s.", watch.Max)
	}
	return msg
}

// lastLines keeps the end of a container's output.
func lastLines(s string) string {
	s = strings.TrimSpace(s)
	lines := strings.Split(s, "\n")
	if len(lines) > 5 {
		lines = lines[len(lines)-5:]
	}
	s = strings.Join(lines, "\n")
	if len(s) > 1024 {
		s = "…" + s[len(s)-1024:]
	}
	return s
}

// lastWarning is the message of the newest warning Event about an object.
func (d *run) lastWarning(ctx context.Context, namespace, name, uid string) string {
	var list corev1.EventList
	if err := d.APIReader.List(ctx, &list, client.InNamespace(namespace),
		client.MatchingFieldsSelector{Selector: fields.SelectorFromSet(fields.Set{"involvedObject.uid": uid, "type": corev1.EventTypeWarning})}); err != nil {
		d.Log.Error(err, "reading the events of an instance not running", "namespace", namespace, "name", name)
		return ""
	}
	var newest *corev1.Event
	for i := range list.Items {
		e := &list.Items[i]
		if e.InvolvedObject.Name != name {
			continue
		}
		if newest == nil || seen(e).After(seen(newest)) {
			newest = e
		}
	}
	if newest == nil {
		return ""
	}
	return fmt.Sprintf("%s: %s", newest.Reason, lastLines(newest.Message))
}

func seen(e *corev1.Event) time.Time {
	if !e.LastTimestamp.IsZero() {
		return e.LastTimestamp.Time
	}
	if e.Series != nil {
		return e.Series.LastObservedTime.Time
	}
	return e.EventTime.Time
}

// fail stops the deploy at group.
func (d *run) fail(group, why string) {
	d.status.Phase, d.status.Message, d.status.Finished = PhaseFailed, why, stamp(d.now)
	deploys.WithLabelValues(ReasonDeployFailed).Inc()
	d.Log.Info("deploy stopped", "namespace", d.manifest.Namespace, "deployment", d.manifest.Labels[names.LabelDeployment], "group", group, "reason", ReasonDeployFailed, "error", why)
	d.Recorder.Eventf(d.manifest, nil, corev1.EventTypeWarning, ReasonDeployFailed, "Deploy",
		"deploy stopped at instance group '%s': %s Instances not updated keep their version; change the manifest or set annotation %s to retry", group, why, names.AnnotationRetryDeploy)
}

// progress sums the instances updated of the groups the deploy changes,
// and names the step it is at.
func (d *run) progress(plan update.Plan) {
	d.status.Updated, d.status.Total, d.status.Step = 0, 0, ""
	for _, g := range plan {
		gs := d.status.Groups[g.Name]
		if gs == nil || gs.Phase == groupUnchanged {
			continue
		}
		total := 0
		for _, n := range gs.Replicas {
			total += n
		}
		d.status.Total += total
		if gs.Phase == groupDone {
			d.status.Updated += total
			continue
		}
		done := 0
		for _, n := range released(gs.Steps, len(gs.Sets), gs.Step-1) {
			done += n
		}
		d.status.Updated += done
		if d.status.Step == "" && gs.Step >= 0 {
			what := "batch"
			if gs.Steps[gs.Step].Canary {
				what = "canary"
			}
			d.status.Step = fmt.Sprintf("%s.%s.%d-of-%d", g.Name, what, gs.Step+1, len(gs.Steps))
		}
	}
}
