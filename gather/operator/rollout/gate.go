package rollout

import (
	"context"
	"fmt"
	"maps"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bosh-injector/bosh-injector/gather/names"
	"github.com/bosh-injector/bosh-injector/gather/operator/status"
	"github.com/bosh-injector/bosh-injector/inject"
)

// sweep keeps st.Instances, the instances each StatefulSet has started,
// true to the cluster at every pass, deploying or not: a StatefulSet seen
// first counts the pods running without the gate (created before the
// deploy held any), a scaled-down one forgets its removed instances (added
// again, they are new ones), a deleted one is dropped; and a started
// instance's pod the webhook gated (recreated before it saw the deploy's
// count) is released.
func (r *Reconciler) sweep(ctx context.Context, st *status.Deploy, sets map[string][]*appsv1.StatefulSet) error {
	seen := map[string]bool{}
	for _, group := range sets {
		for _, s := range group {
			seen[s.Name] = true
			started, known := st.Instances[s.Name]
			replicas := int(ptr.Deref(s.Spec.Replicas, 1))
			// A gated pod is never Ready: only then is there one to find.
			if known && int(s.Status.ReadyReplicas) >= int(s.Status.Replicas) {
				if started > replicas {
					st.Instances[s.Name] = replicas
				}
				continue
			}
			var pods corev1.PodList
			if err := r.APIReader.List(ctx, &pods, client.InNamespace(s.Namespace), client.MatchingLabels(s.Spec.Selector.MatchLabels)); err != nil {
				return fmt.Errorf("listing the pods of StatefulSet %s: %w", s.Name, err)
			}
			if !known {
				for _, p := range pods.Items {
					if o, ok := names.OrdinalIn(s.Name, p.Name); ok && !inject.Gated(&p) {
						started = max(started, o+1)
					}
				}
			}
			st.Instances[s.Name] = min(started, replicas)
			if err := r.release(ctx, s, pods.Items, st.Instances[s.Name]); err != nil {
				return err
			}
		}
	}
	maps.DeleteFunc(st.Instances, func(name string, _ int) bool { return !seen[name] })
	return nil
}

// ungate releases the gated pods of a StatefulSet's first started
// instances.
func (d *run) ungate(ctx context.Context, s *appsv1.StatefulSet, started int) error {
	pods, err := d.pods(ctx, s)
	if err != nil {
		return err
	}
	return d.release(ctx, s, pods, started)
}

// release removes the deploy's scheduling gate from the pods among pods
// of the first started instances of s.
func (r *Reconciler) release(ctx context.Context, s *appsv1.StatefulSet, pods []corev1.Pod, started int) error {
	for i := range pods {
		p := &pods[i]
		if o, ok := names.OrdinalIn(s.Name, p.Name); !ok || o >= started || !inject.Gated(p) || p.DeletionTimestamp != nil {
			continue
		}
		patch := client.MergeFromWithOptions(p.DeepCopy(), client.MergeFromWithOptimisticLock{})
		inject.Ungate(p)
		if err := r.Client.Patch(ctx, p, patch); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("starting instance %s: %w", p.Name, err)
		}
	}
	return nil
}

// scaledUp says whether a StatefulSet of a group the deploy rolls out has
// instances no deploy started: new replicas.
func scaledUp(accepted status.Gathering, sets map[string][]*appsv1.StatefulSet, started map[string]int) bool {
	return anyDeployed(accepted, sets, func(s *appsv1.StatefulSet) bool { return int(ptr.Deref(s.Spec.Replicas, 1)) > started[s.Name] })
}

// scalingDown says whether a StatefulSet of a group the deploy rolls out
// has a recorded scale-down.
func scalingDown(accepted status.Gathering, sets map[string][]*appsv1.StatefulSet) bool {
	return anyDeployed(accepted, sets, func(s *appsv1.StatefulSet) bool {
		_, ok := s.Annotations[names.AnnotationScaleDown]
		return ok
	})
}

// anyDeployed says whether f holds for a StatefulSet of a group the
// deploy rolls out.
func anyDeployed(accepted status.Gathering, sets map[string][]*appsv1.StatefulSet, f func(*appsv1.StatefulSet) bool) bool {
	for _, g := range accepted.Plan {
		label := names.LabelValue(g.Name)
		if _, ok := accepted.Versions[label]; !ok {
			continue
		}
		if slices.ContainsFunc(sets[label], f) {
			return true
		}
	}
	return false
}
