// Package disks is the operator's persistent disk controller. It does what
// the director's disk manager does around an instance's persistent disks,
// on the claims of a deployment's StatefulSets:
//
//   - resize: a StatefulSet's volumeClaimTemplates cannot change, so the
//     webhook records the sizes the user applied (names.AnnotationDiskSizes)
//     and this controller grows each instance's claims to them in the
//     deploy's order (canaries, then max_in_flight at a time, AZ by AZ),
//     each instance drained first (its pod deleted, which runs its jobs'
//     drain) as the director stops an instance before touching its disk;
//   - a disk added or removed: the webhook records the templates applied
//     (names.AnnotationDiskTemplates); this controller replaces the
//     StatefulSet (deleted leaving its pods and claims, created again with
//     them), then drains each instance in the deploy's order so that its
//     pod mounts the new set of disks;
//   - orphaned disks: a claim no instance mounts any more (scaled down, its
//     disk removed, the StatefulSet deleted) is labelled orphaned with its
//     instance and time, and deleted after the retention, as the director
//     orphans disks and cleans them up after days.
//
// Its state is the claims' and StatefulSets' own fields and annotations, so
// an operator restarted in the middle of a resize resumes where it was.
package disks

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/bosh-injector/bosh-injector/gather/model/update"
	"github.com/bosh-injector/bosh-injector/gather/names"
	"github.com/bosh-injector/bosh-injector/gather/operator/disruption"
	"github.com/bosh-injector/bosh-injector/gather/operator/orphan"
	"github.com/bosh-injector/bosh-injector/gather/operator/podstate"
	"github.com/bosh-injector/bosh-injector/gather/operator/statefulsets"
	"github.com/bosh-injector/bosh-injector/gather/operator/status"
	"github.com/bosh-injector/bosh-injector/inject"
)

// Event reasons.
const (
	// ReasonOrphaned: a claim no instance mounts was labelled orphaned.
	ReasonOrphaned = "DiskOrphaned"
	// ReasonOrphanDeleted: an orphaned claim outlived the retention.
	ReasonOrphanDeleted = "OrphanedDiskDeleted"
	// ReasonResizing: an instance was drained to grow its disk.
	ReasonResizing = "ResizingDisk"
	// ReasonResizeFailed: a disk cannot grow; the resize stopped there.
	ReasonResizeFailed = "DiskResizeFailed"
)

// poll is how often an instance being resized is checked: its pod and its
// claim's capacity change, which are not watched.
const poll = 2 * time.Second

// Config is the controller's settings.
type Config struct {
	// Retention is how long an orphaned claim is kept (DefaultRetention
	// when 0).
	Retention time.Duration
}

// Reconciler keeps the claims of deployments; a request is a namespace
// and a deployment's label value.
type Reconciler struct {
	Client client.Client
	// APIReader reads pods and StorageClasses, which the manager does not
	// cache.
	APIReader client.Reader
	Recorder  events.EventRecorder
	Log       logr.Logger
	Config    Config
	// Now is the clock, time.Now when nil.
	Now func() time.Time
	// Disruptions, shared with the deploy controller, serializes its drains
	// with the release of a step.
	Disruptions *disruption.Groups
}

// SetupWithManager registers the controller: it follows the StatefulSets
// and the claims of deployments.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("disks").
		Watches(&appsv1.StatefulSet{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			return request(o.GetNamespace(), o.(*appsv1.StatefulSet).Spec.Template.Labels[names.LabelDeployment])
		})).
		Watches(&corev1.PersistentVolumeClaim{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			return request(o.GetNamespace(), o.GetLabels()[names.LabelDeployment])
		})).
		Complete(r)
}

func request(namespace, deployment string) []reconcile.Request {
	if deployment == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: namespace, Name: names.LabelValue(deployment)}}}
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// Reconcile resizes and orphans the claims of one deployment.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	deployment := req.Name
	var setList appsv1.StatefulSetList
	if err := r.Client.List(ctx, &setList, client.InNamespace(req.Namespace)); err != nil {
		return reconcile.Result{}, err
	}
	var sets []*appsv1.StatefulSet
	for i := range setList.Items {
		s := &setList.Items[i]
		if names.LabelValue(s.Spec.Template.Labels[names.LabelDeployment]) == deployment {
			sets = append(sets, s)
		}
	}
	sets, replacing, again, err := r.changeDisks(ctx, req.Namespace, deployment, sets)
	if err != nil {
		return reconcile.Result{}, err
	}
	groups := map[string][]*appsv1.StatefulSet{}
	for _, s := range sets {
		g := s.Spec.Template.Labels[names.LabelInstanceGroup]
		groups[g] = append(groups[g], s)
	}
	var claims corev1.PersistentVolumeClaimList
	if err := r.Client.List(ctx, &claims, client.InNamespace(req.Namespace), client.MatchingLabels{names.LabelDeployment: deployment}); err != nil {
		return reconcile.Result{}, err
	}
	wait, err := r.orphans(ctx, deployment, claims.Items, sets)
	if err != nil {
		return reconcile.Result{}, err
	}
	if again {
		wait = soonest(wait, poll)
	}
	for group, gs := range groups {
		if replacing[group] {
			continue // its StatefulSets are not all there yet
		}
		if slices.ContainsFunc(gs, func(s *appsv1.StatefulSet) bool { return s.Annotations[names.AnnotationDiskRemount] != "" }) {
			// Each instance mounts its changed disks before any grows.
			more, err := r.remountGroup(ctx, deployment, group, gs)
			if err != nil {
				return reconcile.Result{}, err
			}
			if more {
				wait = soonest(wait, poll)
			}
			continue
		}
		w, err := r.resizeGroup(ctx, deployment, group, gs)
		if err != nil {
			return reconcile.Result{}, err
		}
		wait = soonest(wait, w)
	}
	return reconcile.Result{RequeueAfter: wait}, nil
}

func (r *Reconciler) retention() time.Duration {
	if r.Config.Retention > 0 {
		return r.Config.Retention
	}
	return DefaultRetention
}

// orphans labels, adopts back and expires claims; it returns when the next
// orphan expires.
func (r *Reconciler) orphans(ctx context.Context, deployment string, claims []corev1.PersistentVolumeClaim, sets []*appsv1.StatefulSet) (time.Duration, error) {
	now := r.now()
	actions, next := orphanActions(deployment, claims, sets, now, r.retention())
	for _, a := range actions {
		c := a.claim
		log := r.Log.WithValues("namespace", c.Namespace, "claim", c.Name)
		switch a.change {
		case expire:
			if err := orphan.Delete(ctx, r.Client, c); client.IgnoreNotFound(err) != nil {
				return 0, fmt.Errorf("deleting orphaned claim %s: %w", c.Name, err)
			}
			log.Info("deleted an orphaned disk after the retention", "instance", orphan.Instance(c))
			r.Recorder.Eventf(c, nil, corev1.EventTypeNormal, ReasonOrphanDeleted, "DeleteOrphan", "orphaned disk of %s deleted: kept %s", orphan.Instance(c), r.retention())
			continue
		case mark:
			patch := client.MergeFrom(c.DeepCopy())
			orphan.Mark(&c.ObjectMeta, a.instance, now)
			if err := r.Client.Patch(ctx, c, patch); err != nil {
				return 0, client.IgnoreNotFound(err)
			}
			log.Info("orphaned a disk no instance mounts", "instance", a.instance)
			r.Recorder.Eventf(c, nil, corev1.EventTypeNormal, ReasonOrphaned, "Orphan", "disk of %s orphaned: kept %s", a.instance, r.retention())
		case adopt:
			patch := client.MergeFrom(c.DeepCopy())
			orphan.Unmark(&c.ObjectMeta)
			if err := r.Client.Patch(ctx, c, patch); err != nil {
				return 0, client.IgnoreNotFound(err)
			}
			log.Info("an orphaned disk is mounted again by its instance")
		}
	}
	return next, nil
}

func metav1Set(m *map[string]string, k, v string) {
	if *m == nil {
		*m = map[string]string{}
	}
	(*m)[k] = v
}

// groupConfig is the group's update config from its deployment's accepted
// plan, or the fallback before any.
func (r *Reconciler) groupConfig(ctx context.Context, namespace, deployment, group string, first *appsv1.StatefulSet) (update.Config, error) {
	reqs, err := status.ManifestRequests(ctx, r.Client, namespace, deployment)
	if err != nil {
		return update.Config{}, err
	}
	for _, q := range reqs {
		var s corev1.Secret
		if err := r.Client.Get(ctx, q.NamespacedName, &s); err != nil {
			continue
		}
		for _, g := range status.GatheringOf(&s).Plan {
			if names.LabelValue(g.Name) == names.LabelValue(group) {
				return g.Update, nil
			}
		}
	}
	return fallbackConfig(first), nil
}

// resizeGroup takes a group's instances whose claims are smaller than
// wanted a batch at a time; it returns when to look again (0 when done).
func (r *Reconciler) resizeGroup(ctx context.Context, deployment, group string, sets []*appsv1.StatefulSet) (time.Duration, error) {
	wanted := false
	for _, s := range sets {
		w, err := statefulsets.WantedSizes(s)
		if err != nil {
			r.Log.Error(err, "unreadable wanted sizes")
			continue
		}
		wanted = wanted || len(w) > 0
	}
	if !wanted {
		return 0, nil
	}
	var at *appsv1.StatefulSet
	again, err := r.inOrder(ctx, deployment, group, sets, func(sl slot, batch []slot) (bool, error) {
		at = sl.set
		hold := func() func() { return r.Disruptions.Hold(sl.set.Namespace, deployment, group) }
		return r.resizeInstance(ctx, group, sl, hold, func() (string, error) { return r.unavailable(ctx, sets, batch) })
	})
	var stop stopped
	if asStopped(err, &stop) {
		return 0, r.stop(ctx, at, stop)
	}
	if err != nil {
		return 0, err
	}
	if again {
		return poll, nil
	}
	for _, s := range sets {
		if err := r.stop(ctx, s, ""); err != nil {
			return 0, err
		}
	}
	return 0, nil
}

// inOrder moves each instance of a group on by step, given its batch, a
// batch at a time in the deploy's order; it returns whether an instance is
// not done yet.
func (r *Reconciler) inOrder(ctx context.Context, deployment, group string, sets []*appsv1.StatefulSet, step func(slot, []slot) (bool, error)) (bool, error) {
	slices.SortFunc(sets, func(a, b *appsv1.StatefulSet) int {
		ai, _ := strconv.Atoi(a.Spec.Template.Labels[names.LabelAZIndex])
		bi, _ := strconv.Atoi(b.Spec.Template.Labels[names.LabelAZIndex])
		return ai - bi
	})
	cfg, err := r.groupConfig(ctx, sets[0].Namespace, deployment, group, sets[0])
	if err != nil {
		return false, err
	}
	order, err := batches(sets, cfg)
	if err != nil {
		return false, fmt.Errorf("instance group '%s': %w", group, err)
	}
	for _, b := range order {
		busy := false
		for _, sl := range b {
			done, err := step(sl, b)
			if err != nil {
				return false, err
			}
			busy = busy || !done
		}
		if busy {
			return true, nil
		}
	}
	return false, nil
}

// stopped is why a resize cannot go on, the StatefulSet's resize status.
type stopped string

func (s stopped) Error() string { return string(s) }

func asStopped(err error, s *stopped) bool {
	v, ok := err.(stopped)
	*s = v
	return ok
}

// stop records why a StatefulSet's resize stopped ("" clears it).
func (r *Reconciler) stop(ctx context.Context, s *appsv1.StatefulSet, why stopped) error {
	if s.Annotations[names.AnnotationDiskResize] == string(why) {
		return nil
	}
	patch := client.MergeFrom(s.DeepCopy())
	if why == "" {
		delete(s.Annotations, names.AnnotationDiskResize)
	} else {
		metav1Set(&s.Annotations, names.AnnotationDiskResize, string(why))
		r.Log.Info("disk resize stopped", "namespace", s.Namespace, "statefulset", s.Name, "why", string(why))
		r.Recorder.Eventf(s, nil, corev1.EventTypeWarning, ReasonResizeFailed, "Resize", "%s", string(why))
	}
	return client.IgnoreNotFound(r.Client.Patch(ctx, s, patch))
}

// unavailable names an instance of the group outside batch whose pod is
// not Ready ("" when all are): one the deploy controller is updating, as a
// manifest applied with the larger disk rolls the group too, or one
// failing. Draining beside it would take more instances down at once than
// max_in_flight; the director updates an instance's disk within its
// deploy, one batch at a time. An instance stopped on request or not yet
// started by a deploy (its pod held by the gate) is down by intent and
// does not hold the resize back.
func (r *Reconciler) unavailable(ctx context.Context, sets []*appsv1.StatefulSet, batch []slot) (string, error) {
	for _, cached := range sets {
		// From the API server: a step the deploy just released may not
		// be in the cache yet.
		s := &appsv1.StatefulSet{}
		if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(cached), s); err != nil {
			return "", err
		}
		var pods corev1.PodList
		if err := r.APIReader.List(ctx, &pods, client.InNamespace(s.Namespace), client.MatchingLabels(s.Spec.Selector.MatchLabels)); err != nil {
			return "", err
		}
		start := 0
		if s.Spec.Ordinals != nil {
			start = int(s.Spec.Ordinals.Start)
		}
		for o := start; o < start+int(ptr.Deref(s.Spec.Replicas, 1)); o++ {
			if slices.ContainsFunc(batch, func(b slot) bool { return b.set.Name == s.Name && b.ordinal == o }) {
				continue
			}
			name := names.PodName(s.Name, o)
			if !slices.ContainsFunc(pods.Items, func(p corev1.Pod) bool {
				return p.Name == name && (ready(&p) || podstate.Stopped(&p) || inject.Gated(&p)) && !released(s, o, &p)
			}) {
				return name, nil
			}
		}
	}
	return "", nil
}

// released says whether the deploy released pod (ordinal o) for its
// update: at or above the partition and not at the update revision, the
// StatefulSet controller replaces it next. Still Ready, it is as good as
// down.
func released(s *appsv1.StatefulSet, o int, pod *corev1.Pod) bool {
	if s.Spec.UpdateStrategy.Type == appsv1.OnDeleteStatefulSetStrategyType {
		return false
	}
	ru := s.Spec.UpdateStrategy.RollingUpdate
	partition := 0
	if ru != nil {
		partition = int(ptr.Deref(ru.Partition, 0))
	}
	return s.Status.UpdateRevision != "" && o >= partition && pod.Labels[appsv1.ControllerRevisionHashLabelKey] != s.Status.UpdateRevision
}

// resizeInstance moves one instance's resize on by one step: drain (delete
// its pod) before touching a claim, once the group's other instances
// outside its batch are Ready (unavailable names one that is not), grow
// the claim once the pod is gone, then wait for the new capacity and the
// instance Ready.
func (r *Reconciler) resizeInstance(ctx context.Context, group string, sl slot, hold func() (release func()), unavailable func() (string, error)) (bool, error) {
	wanted, err := statefulsets.WantedSizes(sl.set)
	if err != nil {
		return true, nil
	}
	instance := group + "/" + strconv.Itoa(sl.ordinal)
	podName := names.PodName(sl.set.Name, sl.ordinal)
	done := true
	for _, t := range sl.set.Spec.VolumeClaimTemplates {
		want, ok := wanted[t.Name]
		if !ok {
			continue
		}
		var c corev1.PersistentVolumeClaim
		key := types.NamespacedName{Namespace: sl.set.Namespace, Name: statefulsets.ClaimName(t.Name, sl.set.Name, sl.ordinal)}
		if err := r.Client.Get(ctx, key, &c); err != nil {
			if apierrors.IsNotFound(err) {
				// Not made yet: the StatefulSet makes it from the
				// template, and this resize grows it then.
				continue
			}
			return false, err
		}
		spec := c.Spec.Resources.Requests[corev1.ResourceStorage]
		capacity := c.Status.Capacity[corev1.ResourceStorage]
		drained := c.Annotations[names.AnnotationDrainedPod]
		if spec.Cmp(want) >= 0 && capacity.Cmp(want) >= 0 && drained == "" {
			continue // grown
		}
		// The pod is read from the API server only for an instance
		// being resized, the one in flight.
		var pod corev1.Pod
		podErr := r.APIReader.Get(ctx, types.NamespacedName{Namespace: c.Namespace, Name: podName}, &pod)
		if podErr != nil && !apierrors.IsNotFound(podErr) {
			return false, podErr
		}
		podExists := podErr == nil
		switch {
		case spec.Cmp(want) < 0 && drained == "":
			if err := r.canGrow(ctx, &c, instance, want); err != nil {
				return false, err
			}
			// The deploy releases no step of the group from the check
			// to the mark, which its next step waits for.
			release := hold()
			other, err := unavailable()
			if err != nil || other != "" {
				release()
				if err != nil {
					return false, err
				}
				r.Log.V(1).Info("waiting for the group's other instances to be Ready before draining", "namespace", c.Namespace, "instance", instance, "notReady", other)
				done = false
				continue
			}
			uid := "-"
			if podExists {
				uid = string(pod.UID)
			}
			patch := client.MergeFrom(c.DeepCopy())
			metav1Set(&c.Annotations, names.AnnotationDrainedPod, uid)
			err = r.Client.Patch(ctx, &c, patch)
			release()
			if err != nil {
				return false, err
			}
			if podExists {
				// Deleting the pod runs its jobs' drain (the
				// webhook's preStop) before the disk is touched.
				if err := r.Client.Delete(ctx, &pod, client.Preconditions{UID: &pod.UID}); client.IgnoreNotFound(err) != nil {
					return false, err
				}
			}
			r.Recorder.Eventf(sl.set, nil, corev1.EventTypeNormal, ReasonResizing, "Resize", "instance '%s': draining to grow disk %s from %s to %s", instance, c.Name, spec.String(), want.String())
			done = false
		case spec.Cmp(want) < 0:
			if podExists && string(pod.UID) == drained {
				done = false // still draining
				continue
			}
			patch := client.MergeFrom(c.DeepCopy())
			c.Spec.Resources.Requests[corev1.ResourceStorage] = want
			if err := r.Client.Patch(ctx, &c, patch); err != nil {
				if apierrors.IsForbidden(err) || apierrors.IsInvalid(err) {
					return false, stopped(fmt.Sprintf("instance '%s': persistent disk %s cannot grow to %s: %v", instance, c.Name, want.String(), err))
				}
				return false, err
			}
			done = false
		case capacity.Cmp(want) < 0:
			done = false // the resizer and the kubelet grow it
		case drained != "":
			if !podExists || !ready(&pod) {
				done = false
				continue
			}
			patch := client.MergeFrom(c.DeepCopy())
			delete(c.Annotations, names.AnnotationDrainedPod)
			if err := r.Client.Patch(ctx, &c, patch); err != nil {
				return false, err
			}
		}
	}
	return done, nil
}

// canGrow refuses, before any drain, a claim whose StorageClass does not
// allow expansion, as the director's CPI raises NotSupported for a disk it
// cannot resize (the director would migrate the data to a new disk, which
// bosh-injector does not do). A class the operator may not read (it runs
// with namespaced Roles) is left to the API server's own check.
func (r *Reconciler) canGrow(ctx context.Context, c *corev1.PersistentVolumeClaim, instance string, want resource.Quantity) error {
	name := ""
	if c.Spec.StorageClassName != nil {
		name = *c.Spec.StorageClassName
	}
	if name == "" {
		return stopped(fmt.Sprintf("instance '%s': persistent disk %s cannot grow to %s: it has no StorageClass, so it cannot be expanded", instance, c.Name, want.String()))
	}
	var class storagev1.StorageClass
	if err := r.APIReader.Get(ctx, types.NamespacedName{Name: name}, &class); err != nil {
		if apierrors.IsForbidden(err) {
			return nil
		}
		return err
	}
	if class.AllowVolumeExpansion == nil || !*class.AllowVolumeExpansion {
		return stopped(fmt.Sprintf("instance '%s': persistent disk %s cannot grow to %s: StorageClass '%s' does not allow volume expansion (allowVolumeExpansion)", instance, c.Name, want.String(), name))
	}
	return nil
}

func ready(pod *corev1.Pod) bool {
	return pod.DeletionTimestamp == nil && podstate.Ready(pod)
}
