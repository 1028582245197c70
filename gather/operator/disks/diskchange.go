package disks

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bosh-injector/bosh-injector/gather/names"
	"github.com/bosh-injector/bosh-injector/gather/operator/statefulsets"
)

// Event reasons of a changed set of disks.
const (
	// ReasonReplacingSet: a StatefulSet is deleted (its pods and claims
	// kept) to be created again with another set of disks.
	ReasonReplacingSet = "ReplacingStatefulSet"
	// ReasonRemounting: an instance was drained to mount its changed disks.
	ReasonRemounting = "RemountingDisks"
)

// recordKey is the ConfigMap key holding the StatefulSet to create.
const recordKey = "statefulset"

// replacement is the StatefulSet that replaces live to change its disks:
// the live object with the wanted templates, marked for its pods to be
// replaced.
func replacement(live *appsv1.StatefulSet, templates []corev1.PersistentVolumeClaim) *appsv1.StatefulSet {
	n := &appsv1.StatefulSet{
		TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"},
		ObjectMeta: metav1.ObjectMeta{Name: live.Name, Namespace: live.Namespace, Labels: maps.Clone(live.Labels),
			Annotations: maps.Clone(live.Annotations), OwnerReferences: live.OwnerReferences},
		Spec: *live.Spec.DeepCopy(),
	}
	delete(n.Annotations, names.AnnotationDiskTemplates)
	metav1Set(&n.Annotations, names.AnnotationDiskRemount, "true")
	n.Spec.VolumeClaimTemplates = templates
	return n
}

// record is the ConfigMap that holds the replacement of the StatefulSet of
// UID from while it is deleted: the state an operator restarted in between
// resumes from, as the StatefulSet itself is gone.
func record(n *appsv1.StatefulSet, deployment string, from types.UID) (*corev1.ConfigMap, error) {
	raw, err := json.Marshal(n)
	if err != nil {
		return nil, err
	}
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: names.DiskChangeRecord(n.Name), Namespace: n.Namespace,
			Labels:      map[string]string{names.LabelDiskChange: "true", names.LabelDeployment: deployment},
			Annotations: map[string]string{names.AnnotationDiskChangeFrom: string(from)}},
		Data: map[string]string{recordKey: string(raw)},
	}, nil
}

// changeDisks replaces the deployment's StatefulSets whose set of disks
// changed: it records the replacement, deletes the StatefulSet leaving its
// pods and claims (propagationPolicy Orphan), and creates the replacement
// once it is gone. It returns the StatefulSets as they will be (a
// replacement in place of the one it replaces, so that kept claims stay in
// use and a removed disk's are orphaned), the groups being replaced, and
// when to look again.
func (r *Reconciler) changeDisks(ctx context.Context, namespace, deployment string, sets []*appsv1.StatefulSet) ([]*appsv1.StatefulSet, map[string]bool, bool, error) {
	var records corev1.ConfigMapList
	// Read from the API server: the manager caches no ConfigMaps.
	if err := r.APIReader.List(ctx, &records, client.InNamespace(namespace), client.MatchingLabels{names.LabelDiskChange: "true", names.LabelDeployment: deployment}); err != nil {
		return nil, nil, false, err
	}
	view := map[string]*appsv1.StatefulSet{}
	for _, s := range sets {
		view[s.Name] = s
	}
	busy := map[string]bool{}
	wait := false
	group := func(s *appsv1.StatefulSet) string { return s.Spec.Template.Labels[names.LabelInstanceGroup] }
	for i := range records.Items {
		cm := &records.Items[i]
		var n appsv1.StatefulSet
		if err := json.Unmarshal([]byte(cm.Data[recordKey]), &n); err != nil {
			r.Log.Error(err, "unreadable disk change record", "namespace", namespace, "configmap", cm.Name)
			continue
		}
		live := view[n.Name]
		switch {
		case live != nil && string(live.UID) == cm.Annotations[names.AnnotationDiskChangeFrom]:
			// Deleted, its pods being orphaned, or not yet deleted (the
			// operator stopped after the record).
			if err := r.deleteOrphaning(ctx, live); err != nil {
				return nil, nil, false, err
			}
			view[n.Name], busy[group(&n)], wait = &n, true, true
		case live != nil:
			// Created: the record is done.
			if err := r.Client.Delete(ctx, cm); client.IgnoreNotFound(err) != nil {
				return nil, nil, false, err
			}
		default:
			if err := r.Client.Create(ctx, n.DeepCopy()); err != nil && !apierrors.IsAlreadyExists(err) {
				return nil, nil, false, fmt.Errorf("creating StatefulSet %s with its changed disks: %w", n.Name, err)
			}
			r.Log.Info("StatefulSet created again with its changed disks", "namespace", namespace, "statefulset", n.Name)
			if err := r.Client.Delete(ctx, cm); client.IgnoreNotFound(err) != nil {
				return nil, nil, false, err
			}
			view[n.Name], busy[group(&n)], wait = &n, true, true
		}
	}
	for _, s := range sets {
		templates, ok, err := statefulsets.WantedTemplates(s)
		if err != nil {
			r.Log.Error(err, "unreadable wanted disks")
			continue
		}
		if !ok || s.DeletionTimestamp != nil || view[s.Name] != s {
			continue
		}
		n := replacement(s, templates)
		cm, err := record(n, deployment, s.UID)
		if err != nil {
			return nil, nil, false, err
		}
		if err := r.Client.Create(ctx, cm); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, nil, false, fmt.Errorf("recording the replacement of StatefulSet %s: %w", s.Name, err)
		}
		if err := r.deleteOrphaning(ctx, s); err != nil {
			return nil, nil, false, err
		}
		added, removed := diskChange(s.Spec.VolumeClaimTemplates, templates)
		r.Log.Info("replacing a StatefulSet to change its disks", "namespace", s.Namespace, "statefulset", s.Name, "added", added, "removed", removed)
		r.Recorder.Eventf(s, nil, corev1.EventTypeNormal, ReasonReplacingSet, "ChangeDisks", "replacing StatefulSet %s to add disks [%s] and remove disks [%s]: its pods and claims are kept, a removed disk's claims orphaned",
			s.Name, strings.Join(added, " "), strings.Join(removed, " "))
		view[s.Name], busy[group(s)], wait = n, true, true
	}
	out := make([]*appsv1.StatefulSet, 0, len(view))
	for _, s := range view {
		out = append(out, s)
	}
	return out, busy, wait, nil
}

// deleteOrphaning deletes a StatefulSet leaving its pods (and claims,
// which it never owns) in place, once.
func (r *Reconciler) deleteOrphaning(ctx context.Context, s *appsv1.StatefulSet) error {
	if s.DeletionTimestamp != nil {
		return nil
	}
	err := r.Client.Delete(ctx, s, client.PropagationPolicy(metav1.DeletePropagationOrphan), client.Preconditions{UID: &s.UID})
	if client.IgnoreNotFound(err) != nil && !apierrors.IsConflict(err) {
		return fmt.Errorf("deleting StatefulSet %s to change its disks: %w", s.Name, err)
	}
	return nil
}

// diskChange names the templates added and removed.
func diskChange(old, wanted []corev1.PersistentVolumeClaim) (added, removed []string) {
	has := func(v []corev1.PersistentVolumeClaim, name string) bool {
		return slices.ContainsFunc(v, func(t corev1.PersistentVolumeClaim) bool { return t.Name == name })
	}
	for _, t := range wanted {
		if !has(old, t.Name) {
			added = append(added, t.Name)
		}
	}
	for _, t := range old {
		if !has(wanted, t.Name) {
			removed = append(removed, t.Name)
		}
	}
	return added, removed
}

// remountGroup replaces, in the deploy's order, each pod of a group's
// replaced StatefulSets that does not mount their disks, draining it as
// the director stops an instance before attaching or detaching its disks;
// it returns whether to look again. Within a StatefulSet it goes from the
// lowest ordinal up, unlike a deploy: the StatefulSet controller stops at
// the first pod whose volumes differ from its templates (it cannot update
// a pod's volumes), so it only makes again a pod below every old one.
func (r *Reconciler) remountGroup(ctx context.Context, deployment, group string, sets []*appsv1.StatefulSet) (bool, error) {
	again, err := r.inOrder(ctx, deployment, group, sets, func(sl slot, _ []slot) (bool, error) {
		if sl.set.Annotations[names.AnnotationDiskRemount] == "" {
			return true, nil
		}
		sl.ordinal = int(ptr.Deref(sl.set.Spec.Replicas, 1)) - 1 - sl.ordinal
		return r.remountInstance(ctx, group, sl)
	})
	if err != nil || again {
		return again, err
	}
	for _, s := range sets {
		if _, ok := s.Annotations[names.AnnotationDiskRemount]; !ok {
			continue
		}
		patch := client.MergeFrom(s.DeepCopy())
		delete(s.Annotations, names.AnnotationDiskRemount)
		if err := r.Client.Patch(ctx, s, patch); client.IgnoreNotFound(err) != nil {
			return false, err
		}
	}
	return false, nil
}

// remountInstance moves one instance on by one step: a pod that does not
// mount its StatefulSet's claims is deleted (its jobs drain), and the
// instance is done when its new pod is Ready.
func (r *Reconciler) remountInstance(ctx context.Context, group string, sl slot) (bool, error) {
	var pod corev1.Pod
	err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: sl.set.Namespace, Name: names.PodName(sl.set.Name, sl.ordinal)}, &pod)
	if apierrors.IsNotFound(err) {
		return false, nil // the StatefulSet makes it
	}
	if err != nil {
		return false, err
	}
	if mounts(&pod, sl) {
		return ready(&pod), nil
	}
	if pod.DeletionTimestamp == nil {
		if err := r.Client.Delete(ctx, &pod, client.Preconditions{UID: &pod.UID}); client.IgnoreNotFound(err) != nil {
			return false, err
		}
		instance := group + "/" + strconv.Itoa(sl.ordinal)
		r.Log.Info("draining an instance to mount its changed disks", "namespace", pod.Namespace, "pod", pod.Name)
		r.Recorder.Eventf(sl.set, nil, corev1.EventTypeNormal, ReasonRemounting, "ChangeDisks", "instance '%s': draining to mount its changed disks", instance)
	}
	return false, nil
}

// mounts says whether a pod mounts exactly its StatefulSet's claims for its
// ordinal.
func mounts(pod *corev1.Pod, sl slot) bool {
	want := map[string]bool{}
	for _, t := range sl.set.Spec.VolumeClaimTemplates {
		want[statefulsets.ClaimName(t.Name, sl.set.Name, sl.ordinal)] = true
	}
	suffix := "-" + names.PodName(sl.set.Name, sl.ordinal)
	have := 0
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim == nil || !strings.HasSuffix(v.PersistentVolumeClaim.ClaimName, suffix) {
			continue
		}
		if !want[v.PersistentVolumeClaim.ClaimName] {
			return false
		}
		have++
	}
	return have == len(want)
}
