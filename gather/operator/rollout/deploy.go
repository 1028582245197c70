// Package rollout is the operator's deploy controller: it takes each
// configuration version the job runner accepted (the instance groups'
// resolved and BPM versions and the manifest's update plan) to the
// deployment's StatefulSets as a BOSH director deploys: instance groups in
// manifest order (consecutive `serial: false` groups together), within a
// group canaries first and then batches of max_in_flight, AZ by AZ. A step
// replaces instances by lowering the StatefulSets' rollingUpdate.partition
// and starts new ones (a first deploy's, a scale-up's) by lifting their
// pods' scheduling gate, once the instances of the step before run: Ready
// after the watch time's minimum, by its maximum, restarts in between
// allowed, as the director polls an updated instance. An instance not
// running by then stops the deploy: what was not updated keeps its version
// and keeps running, what was not started stays held. A deploy is done
// when every instance of its groups runs at the accepted version. It
// changes nothing of a StatefulSet but its update strategy's partition,
// its pod template's version annotations and, for a scale-down the webhook
// held (statefulsets.KeepReplicas), its scale-down annotation and its
// replicas; nothing of a pod but the deploy's scheduling gate; nothing of
// the manifest Secret but the deploy status annotation and its state and
// step labels; besides, it records Events.
package rollout

import (
	"cmp"
	"context"
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

	"github.com/bosh-injector/bosh-injector/gather/model/instance"
	"github.com/bosh-injector/bosh-injector/gather/model/update"
	"github.com/bosh-injector/bosh-injector/gather/names"
	"github.com/bosh-injector/bosh-injector/gather/operator/disruption"
	"github.com/bosh-injector/bosh-injector/gather/operator/podstate"
	"github.com/bosh-injector/bosh-injector/gather/operator/status"
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
	// Disruptions, shared with the disk controller, serializes the release
	// of a step with its drains.
	Disruptions *disruption.Groups
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
	reqs, err := status.ManifestRequests(ctx, r.Client, sts.Namespace, deployment)
	if err != nil {
		r.Log.Error(err, "listing manifest Secrets")
	}
	return reqs
}

// Reconcile advances one deployment's deploy as far as it can go now.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var manifest corev1.Secret
	if err := r.APIReader.Get(ctx, req.NamespacedName, &manifest); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	accepted := status.GatheringOf(&manifest)
	if !status.IsManifest(&manifest) || len(accepted.Versions) == 0 || accepted.Plan == nil {
		return reconcile.Result{}, nil
	}
	deployment := manifest.Labels[names.LabelDeployment]
	now := r.now()
	// st is read apart from prev, whose maps it must not share: prev is
	// what setStatus compares with.
	prev, st := status.DeployOf(&manifest), status.DeployOf(&manifest)
	retry := manifest.Annotations[names.AnnotationRetryDeploy]
	t := status.Target(accepted)
	// A deploy plans from what runs: a retry, as `bosh deploy` run again,
	// plans again, so a group a failed deploy left half updated is finished.
	restart := func() {
		st = status.Deploy{Target: t, Retry: retry, Phase: status.PhaseDeploying, Groups: map[string]*status.Group{}, Started: stamp(now), Instances: st.Instances}
	}
	if st.Target != t || st.Retry != retry {
		restart()
	}
	if st.Groups == nil {
		st.Groups = map[string]*status.Group{}
	}
	if st.Instances == nil {
		st.Instances = map[string]int{}
	}
	sets, err := r.statefulSets(ctx, manifest.Namespace, deployment)
	if err != nil {
		return reconcile.Result{}, err
	}
	if err := r.sweep(ctx, &st, sets); err != nil {
		return reconcile.Result{}, err
	}
	if (st.Phase == status.PhaseDeployed && scaledUp(accepted, sets, st.Instances)) || (st.Phase != status.PhaseDeploying && scalingDown(accepted, sets)) {
		// More replicas are instances to start, fewer instances to
		// delete, in the deploy's order: a new deploy, as `bosh deploy`
		// of the new instances count.
		restart()
	}
	var result reconcile.Result
	if st.Phase == status.PhaseDeploying {
		d := &run{Reconciler: r, manifest: &manifest, versions: accepted.Versions, bpm: accepted.BPM, sets: sets, state: &st, now: now}
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
func (r *Reconciler) setStatus(ctx context.Context, manifest *corev1.Secret, prev, st status.Deploy) error {
	stepLabel := ""
	if st.Phase == status.PhaseDeploying {
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
	bpm      map[string]int
	sets     map[string][]*appsv1.StatefulSet
	state    *status.Deploy
	now      time.Time
	// deleting is the step of the first group found removing unneeded
	// instances.
	deleting string
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
			if err != nil || d.state.Phase == status.PhaseFailed {
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
	d.state.Phase, d.state.Finished = status.PhaseDeployed, stamp(d.now)
	msg := "every instance group is on its accepted version"
	if d.state.Unplaced = d.unplaced(plan); len(d.state.Unplaced) > 0 {
		msg += fmt.Sprintf("; no StatefulSet runs instance groups '%s': apply what `bosh-injector objects` prints for them", strings.Join(d.state.Unplaced, "', '"))
	}
	d.Log.Info("deployed", "namespace", d.manifest.Namespace, "deployment", d.manifest.Labels[names.LabelDeployment], "unplaced", d.state.Unplaced)
	d.Recorder.Eventf(d.manifest, nil, corev1.EventTypeNormal, status.ReasonDeployed, "Deploy", msg)
	deploys.WithLabelValues(status.ReasonDeployed).Inc()
	return 0, nil
}

// unplaced are the plan's groups with instances and an accepted version
// but no StatefulSet.
func (d *run) unplaced(plan update.Plan) []string {
	var out []string
	for _, g := range plan {
		label := names.LabelValue(g.Name)
		if _, ok := d.versions[label]; ok && ptr.Deref(g.Instances, 1) > 0 && len(d.sets[label]) == 0 {
			out = append(out, g.Name)
		}
	}
	return out
}

// instanceName is the director's name of an instance: group/index.
func instanceName(group string, pod *corev1.Pod) string {
	if i, err := strconv.Atoi(pod.Labels[names.LabelInstanceIndex]); err == nil {
		return instance.IndexName(group, i)
	}
	return group
}

// notRunning is the director's error for an instance not running after its
// update, with why: the containers not ready, their last output (the
// termination message, which is the end of the log for injected
// containers), else what their readiness probes answer (which post-start
// failed, how a process exited; never what either printed), else the pod's last
// warning, else the StatefulSet's (a pod the webhook denied).
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
	if len(output) == 0 {
		// A process container's probe answer says why, which its Event
		// does not (an HTTP probe's names only the status code).
		output = podstate.ProbeAnswers(ctx, pod, failing)
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
	d.state.Phase, d.state.Message, d.state.Finished = status.PhaseFailed, why, stamp(d.now)
	deploys.WithLabelValues(status.ReasonDeployFailed).Inc()
	d.Log.Info("deploy stopped", "namespace", d.manifest.Namespace, "deployment", d.manifest.Labels[names.LabelDeployment], "group", group, "reason", status.ReasonDeployFailed, "error", why)
	d.Recorder.Eventf(d.manifest, nil, corev1.EventTypeWarning, status.ReasonDeployFailed, "Deploy",
		"deploy stopped at instance group '%s': %s Instances not updated keep their version; change the manifest or set annotation %s to retry", group, why, names.AnnotationRetryDeploy)
}

// progress sums the instances updated (replaced or started) of the groups
// the deploy changes, and names the step it is at.
func (d *run) progress(plan update.Plan) {
	d.state.Updated, d.state.Total, d.state.Step = 0, 0, d.deleting
	for _, g := range plan {
		gs := d.state.Groups[g.Name]
		if gs == nil || gs.Phase == groupUnchanged {
			continue
		}
		total := 0
		for _, step := range gs.Steps {
			total += step.N
		}
		d.state.Total += total
		if gs.Phase == groupDone {
			d.state.Updated += total
			continue
		}
		done := 0
		for _, n := range released(gs.Steps, len(gs.Sets), gs.Step-1) {
			done += n
		}
		d.state.Updated += done
		if d.state.Step == "" && gs.Step >= 0 {
			what := "batch"
			if gs.Steps[gs.Step].Canary {
				what = "canary"
			}
			d.state.Step = fmt.Sprintf("%s.%s.%d-of-%d", g.Name, what, gs.Step+1, len(gs.Steps))
		}
	}
}
