package rollout

import (
	"cmp"
	"context"
	"fmt"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bosh-injector/bosh-injector/gather/model/instance"
	"github.com/bosh-injector/bosh-injector/gather/model/update"
	"github.com/bosh-injector/bosh-injector/gather/names"
)

// ReasonDeleting: a batch of a group's unneeded instances (a scale-down's)
// was removed.
const ReasonDeleting = "DeletingInstances"

// manifestReplicas is how many replicas a StatefulSet of group g keeps
// under the manifest's instances (the ordinals whose instance index, as
// the webhook numbers them, is below it), and whether it has more.
func manifestReplicas(g update.Group, s *appsv1.StatefulSet) (int, bool) {
	if g.Instances == nil {
		return 0, false
	}
	per := instance.Replicas(*g.Instances, g.AZs)
	az := 1
	if v, has := s.Spec.Template.Labels[names.LabelAZIndex]; has {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > len(per) {
			// The webhook denies its pods, naming the label.
			return 0, false
		}
		az = n
	}
	return per[az-1], int(ptr.Deref(s.Spec.Replicas, 1)) > per[az-1]
}

// recordScaleDown records on s a scale-down to keep replicas.
func (d *run) recordScaleDown(ctx context.Context, s *appsv1.StatefulSet, keep int) (string, error) {
	p := client.MergeFromWithOptions(s.DeepCopy(), client.MergeFromWithOptimisticLock{})
	if s.Annotations == nil {
		s.Annotations = map[string]string{}
	}
	s.Annotations[names.AnnotationScaleDown] = strconv.Itoa(keep)
	if err := d.Client.Patch(ctx, s, p); err != nil {
		return "", fmt.Errorf("recording the scale-down of StatefulSet %s: %w", s.Name, err)
	}
	d.Log.Info("the manifest has fewer instances than the StatefulSet's replicas: the unneeded ones go first",
		"namespace", s.Namespace, "statefulset", s.Name, "replicas", ptr.Deref(s.Spec.Replicas, 1), "to", keep)
	return s.Annotations[names.AnnotationScaleDown], nil
}

// shrinking is a StatefulSet with a recorded scale-down.
type shrinking struct {
	s                 *appsv1.StatefulSet
	replicas, wanted  int
	azIndex, removing int
}

// shrink removes a group's unneeded instances, those a recorded
// scale-down drops, before its update, as the director deletes them
// (InstanceGroupUpdater#delete_unneeded_instances): max_in_flight of their
// number at a time across the group's AZs, no canaries, each removal's pod
// gone (its drain run in its preStop) before another takes its place. A
// StatefulSet removes its highest ordinals; across AZs the highest index
// goes first. It says whether the group had a scale-down recorded: its
// update waits.
func (d *run) shrink(ctx context.Context, g update.Group, sets []*appsv1.StatefulSet) (outcome, bool, error) {
	var all []*shrinking
	removing, left, recorded := 0, 0, false
	for _, cached := range sets {
		// Read fresh: the cache may not hold yet a scale-down the webhook
		// just recorded (the update would then replace an instance while
		// one is removed) nor the replicas this controller lowered last
		// (a removal would not count as in flight).
		s := &appsv1.StatefulSet{}
		if err := d.APIReader.Get(ctx, client.ObjectKeyFromObject(cached), s); err != nil {
			return outcome{}, false, client.IgnoreNotFound(err)
		}
		_, cachedRecord := cached.Annotations[names.AnnotationScaleDown]
		v, ok := s.Annotations[names.AnnotationScaleDown]
		if keep, beyond := manifestReplicas(g, s); !ok && beyond {
			// The manifest's instances are fewer than the replicas (its
			// StatefulSets not applied yet, or never): recorded as the
			// webhook records a user's scale-down, so the removal is paced
			// and comes before any update step, whenever the user's apply
			// follows.
			var err error
			if v, err = d.recordScaleDown(ctx, s, keep); err != nil {
				return outcome{}, false, err
			}
			ok = true
		}
		recorded = recorded || ok || cachedRecord
		if !ok {
			continue
		}
		replicas := int(ptr.Deref(s.Spec.Replicas, 1))
		wanted, err := strconv.Atoi(v)
		if err != nil || wanted < 0 {
			d.Log.Info("ignoring a malformed scale-down", "namespace", s.Namespace, "statefulset", s.Name, "value", v)
			wanted = replicas
		}
		az, _ := strconv.Atoi(s.Spec.Template.Labels[names.LabelAZIndex])
		pods, err := d.pods(ctx, s)
		if err != nil {
			return outcome{}, false, err
		}
		sh := &shrinking{s: s, replicas: replicas, wanted: min(wanted, replicas), azIndex: az}
		for i := range pods {
			if o, ok := names.OrdinalIn(s.Name, pods[i].Name); ok && o >= replicas {
				sh.removing++
			}
		}
		all = append(all, sh)
		removing += sh.removing
		left += sh.replicas - sh.wanted
	}
	if !recorded {
		return outcome{done: true}, false, nil
	}
	if len(all) == 0 {
		// Done, the cache behind: the update plans from the next pass.
		return outcome{wait: poll}, true, nil
	}
	inFlight, err := g.Update.InFlight([]int{removing + left})
	if err != nil {
		d.fail(g.Name, fmt.Sprintf("instance group '%s': %v", g.Name, err))
		return outcome{}, true, nil
	}
	var pods []string
	for range inFlight - removing {
		var next *shrinking
		for _, sh := range all {
			if sh.replicas > sh.wanted && (next == nil || cmp.Or(cmp.Compare(sh.replicas, next.replicas), cmp.Compare(sh.azIndex, next.azIndex)) > 0) {
				next = sh
			}
		}
		if next == nil {
			break
		}
		next.replicas--
		pods = append(pods, names.PodName(next.s.Name, next.replicas))
	}
	for _, sh := range all {
		lowered := int(ptr.Deref(sh.s.Spec.Replicas, 1)) != sh.replicas
		// Done once the last removed pod is gone: the annotation goes in a
		// pass of its own, and the group's update waits for the next,
		// whose StatefulSets are read after it.
		finished := !lowered && sh.replicas == sh.wanted && sh.removing == 0
		if !lowered && !finished {
			continue
		}
		p := client.MergeFromWithOptions(sh.s.DeepCopy(), client.MergeFromWithOptimisticLock{})
		sh.s.Spec.Replicas = ptr.To(int32(sh.replicas))
		if finished {
			delete(sh.s.Annotations, names.AnnotationScaleDown)
		}
		if err := d.Client.Patch(ctx, sh.s, p); err != nil {
			return outcome{}, false, fmt.Errorf("scaling StatefulSet %s down: %w", sh.s.Name, err)
		}
	}
	if len(pods) > 0 {
		steps.WithLabelValues("delete").Inc()
		d.Log.Info("deleting unneeded instances", "namespace", d.manifest.Namespace, "group", g.Name, "pods", pods, "left", left-len(pods))
		d.Recorder.Eventf(d.manifest, nil, corev1.EventTypeNormal, ReasonDeleting, "Deploy", "instance group '%s': deleting unneeded instances %s (%d more to delete)",
			g.Name, strings.Join(pods, ", "), left-len(pods))
	}
	if d.deleting == "" {
		d.deleting = fmt.Sprintf("%s.deleting.%d-left", g.Name, left+removing)
	}
	return outcome{wait: poll}, true, nil
}
