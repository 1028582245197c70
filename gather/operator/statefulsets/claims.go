// Package statefulsets holds the operator's rules for updates of a
// deployment's StatefulSets, which the webhook applies at admission and
// the controllers read back: claim templates kept as they are with the sizes
// and disks asked for recorded (the disk controller grows and replaces
// them), and a lowered replica count kept for the deploy controller to pace.
// It is pure: no client, no controller.
package statefulsets

import (
	"encoding/json"
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"github.com/bosh-injector/bosh-injector/gather/names"
	"github.com/bosh-injector/bosh-injector/inject"
)

// ClaimName is the name of the claim of a StatefulSet's template for an
// ordinal, as the StatefulSet controller names it.
func ClaimName(template, set string, ordinal int) string {
	return fmt.Sprintf("%s-%s-%d", template, set, ordinal)
}

// ClaimNames are the claims of s's instances, every template's.
func ClaimNames(s *appsv1.StatefulSet) []string {
	start := 0
	if s.Spec.Ordinals != nil {
		start = int(s.Spec.Ordinals.Start)
	}
	var out []string
	for o := start; o < start+int(ptr.Deref(s.Spec.Replicas, 1)); o++ {
		for _, t := range s.Spec.VolumeClaimTemplates {
			out = append(out, ClaimName(t.Name, s.Name, o))
		}
	}
	return out
}

// Draining says whether a claim's instance is drained for its disk to
// grow: its pod is down until the disk controller has grown it.
func Draining(c *corev1.PersistentVolumeClaim) bool {
	return c.Annotations[names.AnnotationDrainedPod] != ""
}

// KeepTemplates lets a StatefulSet update change its claims' sizes and add
// or remove claims, which Kubernetes refuses (volumeClaimTemplates are
// immutable, with no feature gate in 1.37): it puts the old templates back
// into update and records the sizes asked for in names.AnnotationDiskSizes,
// which the operator grows the claims to, and a changed set of disks in
// names.AnnotationDiskTemplates, for which the operator replaces the
// StatefulSet (ReplaceSet). It reports whether it changed update. A
// smaller size is refused, as a claim cannot shrink (the director would
// migrate the data to a new, smaller disk); so is any other change to a
// kept template (class, access modes), which would need that migration too.
func KeepTemplates(old, update *appsv1.StatefulSet) (bool, error) {
	if equality.Semantic.DeepEqual(old.Spec.VolumeClaimTemplates, update.Spec.VolumeClaimTemplates) {
		return carryWanted(old, update), nil
	}
	wanted, err := WantedSizes(old)
	if err != nil {
		return false, err
	}
	if wanted == nil {
		wanted = map[string]resource.Quantity{}
	}
	group := update.Spec.Template.Labels[names.LabelInstanceGroup]
	// templates is the set of disks applied, a kept one as it is now: its
	// new size goes through wanted.
	templates := []corev1.PersistentVolumeClaim{}
	for _, t := range update.Spec.VolumeClaimTemplates {
		i := slices.IndexFunc(old.Spec.VolumeClaimTemplates, func(o corev1.PersistentVolumeClaim) bool { return o.Name == t.Name })
		if i < 0 {
			templates = append(templates, t)
			continue
		}
		o := old.Spec.VolumeClaimTemplates[i]
		templates = append(templates, o)
		size := t.Spec.Resources.Requests[corev1.ResourceStorage]
		current, ok := wanted[t.Name]
		if !ok {
			current = o.Spec.Resources.Requests[corev1.ResourceStorage]
		}
		resized := t.DeepCopy()
		resized.Spec.Resources.Requests[corev1.ResourceStorage] = o.Spec.Resources.Requests[corev1.ResourceStorage]
		if !equality.Semantic.DeepEqual(resized.Spec, o.Spec) || !equality.Semantic.DeepEqual(resized.ObjectMeta, o.ObjectMeta) {
			return false, &inject.Denial{Reason: inject.ReasonDiskChanged, Message: fmt.Sprintf("instance group '%s' (StatefulSet %s): persistent disk '%s' can only change its size: its StorageClass, access modes and labels stay as they are (the director would migrate the data to a new disk)", group, update.Name, t.Name)}
		}
		switch size.Cmp(current) {
		case -1:
			return false, &inject.Denial{Reason: inject.ReasonDiskShrink, Message: fmt.Sprintf("instance group '%s' (StatefulSet %s): persistent disk '%s' of %s cannot shrink to %s: a claim only grows", group, update.Name, t.Name, current.String(), size.String())}
		case 1:
			wanted[t.Name] = size
		}
	}
	// A removed disk's size is no longer wanted.
	for name := range wanted {
		if !slices.ContainsFunc(templates, func(t corev1.PersistentVolumeClaim) bool { return t.Name == name }) {
			delete(wanted, name)
		}
	}
	update.Spec.VolumeClaimTemplates = old.Spec.VolumeClaimTemplates
	if update.Annotations == nil {
		update.Annotations = map[string]string{}
	}
	delete(update.Annotations, names.AnnotationDiskSizes)
	if len(wanted) > 0 {
		raw, err := json.Marshal(wanted)
		if err != nil {
			return false, err
		}
		update.Annotations[names.AnnotationDiskSizes] = string(raw)
	}
	// The same disks in another order are the same disks.
	delete(update.Annotations, names.AnnotationDiskTemplates)
	if !sameDisks(old.Spec.VolumeClaimTemplates, templates) {
		raw, err := json.Marshal(templates)
		if err != nil {
			return false, err
		}
		update.Annotations[names.AnnotationDiskTemplates] = string(raw)
	}
	return true, nil
}

func sameDisks(a, b []corev1.PersistentVolumeClaim) bool {
	key := func(v []corev1.PersistentVolumeClaim) []string {
		out := make([]string, 0, len(v))
		for _, t := range v {
			out = append(out, t.Name)
		}
		slices.Sort(out)
		return out
	}
	return slices.Equal(key(a), key(b))
}

// WantedTemplates reads the volumeClaimTemplates a StatefulSet is to be
// replaced with, nil when its set of disks stays.
func WantedTemplates(s *appsv1.StatefulSet) ([]corev1.PersistentVolumeClaim, bool, error) {
	raw, ok := s.Annotations[names.AnnotationDiskTemplates]
	if !ok {
		return nil, false, nil
	}
	var templates []corev1.PersistentVolumeClaim
	if err := json.Unmarshal([]byte(raw), &templates); err != nil {
		return nil, false, fmt.Errorf("StatefulSet %s: annotation %s: %w", s.Name, names.AnnotationDiskTemplates, err)
	}
	return templates, true, nil
}

// carryWanted keeps the old wanted sizes and disks on an update that left
// them out (`kubectl replace`, an apply whose manager never set them), so
// that the claims are not left half grown nor the disks half changed.
func carryWanted(old, update *appsv1.StatefulSet) bool {
	changed := false
	for _, k := range []string{names.AnnotationDiskSizes, names.AnnotationDiskTemplates} {
		v, ok := old.Annotations[k]
		if !ok {
			continue
		}
		if _, has := update.Annotations[k]; has {
			continue
		}
		if update.Annotations == nil {
			update.Annotations = map[string]string{}
		}
		update.Annotations[k] = v
		changed = true
	}
	return changed
}

// DiskNames names the templates a StatefulSet is to be replaced with, for
// logs (the templates' JSON is long), or nil when its disks stay.
func DiskNames(s *appsv1.StatefulSet) []string {
	templates, _, _ := WantedTemplates(s)
	var out []string
	for _, t := range templates {
		out = append(out, t.Name)
	}
	return out
}

// WantedSizes reads a StatefulSet's wanted claim sizes by template name.
func WantedSizes(s *appsv1.StatefulSet) (map[string]resource.Quantity, error) {
	raw := s.Annotations[names.AnnotationDiskSizes]
	if raw == "" {
		return nil, nil
	}
	var sizes map[string]resource.Quantity
	if err := json.Unmarshal([]byte(raw), &sizes); err != nil {
		return nil, fmt.Errorf("StatefulSet %s: annotation %s: %w", s.Name, names.AnnotationDiskSizes, err)
	}
	return sizes, nil
}
