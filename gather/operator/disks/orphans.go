package disks

import (
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/bosh-injector/bosh-injector/gather/model/instance"
	"github.com/bosh-injector/bosh-injector/gather/names"
	"github.com/bosh-injector/bosh-injector/gather/operator/orphan"
)

// DefaultRetention is how long an orphaned claim is kept: the director's
// default for orphaned disks (director.disks.cleanup_schedule keeps them
// five days).
const DefaultRetention = 5 * 24 * time.Hour

// change is what the operator does to a claim of a deployment.
type change int

const (
	// mark: no instance uses the claim any more; mark it orphaned.
	mark change = iota + 1
	// adopt: an orphaned claim is an instance's again (the StatefulSet
	// scaled back up, or was created again, and mounts it by its name).
	adopt
	// expire: the claim was orphaned longer than the retention.
	expire
)

type action struct {
	claim  *corev1.PersistentVolumeClaim
	change change
	// instance names the instance an orphan belonged to.
	instance string
}

// owner is the StatefulSet, template and ordinal of a claim, which the
// StatefulSet controller names "<template>-<set>-<ordinal>".
func owner(claim *corev1.PersistentVolumeClaim, sets []*appsv1.StatefulSet) (set *appsv1.StatefulSet, template string, ordinal int, ok bool) {
	for _, s := range sets {
		for _, t := range s.Spec.VolumeClaimTemplates {
			if n, ok := names.OrdinalIn(t.Name+"-"+s.Name, claim.Name); ok {
				return s, t.Name, n, true
			}
		}
	}
	return nil, "", 0, false
}

// inUse says whether a StatefulSet's pods mount the claim of ordinal.
func inUse(s *appsv1.StatefulSet, ordinal int) bool {
	start := 0
	if s.Spec.Ordinals != nil {
		start = int(s.Spec.Ordinals.Start)
	}
	replicas := 1
	if s.Spec.Replicas != nil {
		replicas = int(*s.Spec.Replicas)
	}
	return s.DeletionTimestamp == nil && ordinal >= start && ordinal < start+replicas
}

// instanceOf names the instance that used a claim as the director names
// it, "group/uuid (index)"; azCount is how many AZs the group has.
func instanceOf(claim *corev1.PersistentVolumeClaim, deployment string, ordinal, azCount int) string {
	group := claim.Labels[names.LabelInstanceGroup]
	azIndex, err := strconv.Atoi(claim.Labels[names.LabelAZIndex])
	if err != nil {
		azIndex = 1
	}
	index := instance.Index(ordinal, azIndex, azCount)
	return instance.FullName(group, instance.ID(deployment, group, index), index)
}

// azCounts is, per instance group, how many AZs it has: its StatefulSets,
// or for a group whose StatefulSets are gone the highest AZ index of its
// claims.
func azCounts(claims []corev1.PersistentVolumeClaim, sets []*appsv1.StatefulSet) map[string]int {
	out := map[string]int{}
	for _, s := range sets {
		out[s.Spec.Template.Labels[names.LabelInstanceGroup]]++
	}
	gone := map[string]int{}
	for _, c := range claims {
		g := c.Labels[names.LabelInstanceGroup]
		if _, ok := out[g]; ok {
			continue
		}
		a, _ := strconv.Atoi(c.Labels[names.LabelAZIndex])
		gone[g] = max(gone[g], a, 1)
	}
	for g, n := range gone {
		out[g] = n
	}
	return out
}

// orphanActions are the changes to a deployment's claims: a claim no pod
// of its StatefulSet mounts (scaled down, the StatefulSet deleted) is
// orphaned, an orphan mounted again is adopted back, an orphan older than
// retention expires. It also returns when the next orphan expires (0 when
// none will).
func orphanActions(deployment string, claims []corev1.PersistentVolumeClaim, sets []*appsv1.StatefulSet, now time.Time, retention time.Duration) ([]action, time.Duration) {
	azs := azCounts(claims, sets)
	var out []action
	var next time.Duration
	for i := range claims {
		c := &claims[i]
		if c.DeletionTimestamp != nil {
			continue
		}
		orphaned := orphan.Is(c)
		s, _, ordinal, owned := owner(c, sets)
		used := owned && inUse(s, ordinal)
		switch {
		case used && orphaned:
			out = append(out, action{claim: c, change: adopt})
		case used:
		case !orphaned:
			if !owned {
				var ok bool
				// Its StatefulSet is gone: the number its name ends with.
				if ordinal, ok = names.Ordinal(c.Name); !ok {
					continue
				}
			}
			out = append(out, action{claim: c, change: mark, instance: instanceOf(c, deployment, ordinal, azs[c.Labels[names.LabelInstanceGroup]])})
			next = soonest(next, retention)
		default:
			at, err := time.Parse(time.RFC3339, orphan.At(c))
			if err != nil {
				// An orphan without a readable time is kept from now.
				out = append(out, action{claim: c, change: mark, instance: orphan.Instance(c)})
				next = soonest(next, retention)
				continue
			}
			left := at.Add(retention).Sub(now)
			if left <= 0 {
				out = append(out, action{claim: c, change: expire})
				continue
			}
			next = soonest(next, left)
		}
	}
	return out, next
}

func soonest(a, b time.Duration) time.Duration {
	if a == 0 {
		return b
	}
	return min(a, b)
}
