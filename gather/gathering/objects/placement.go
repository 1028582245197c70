package objects

import (
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/bosh-injector/bosh-injector/gather/model/instance"
	"github.com/bosh-injector/bosh-injector/gather/model/manifest"
	"github.com/bosh-injector/bosh-injector/gather/names"
)

// Placement is how AZs map onto the cluster's nodes: an AZ is a failure
// domain, as a zone is.
type Placement struct {
	// NoZoneAffinity leaves each AZ's pods to the scheduler anywhere; by
	// default they require a node of the AZ's zone.
	NoZoneAffinity bool
	// Zones maps an AZ to its zone's name (topology.kubernetes.io/zone)
	// where they differ; by default the zone is named as the AZ.
	Zones map[string]string
}

// Zone is the zone an AZ's pods run in.
func (p Placement) Zone(az string) string {
	if z, ok := p.Zones[az]; ok {
		return z
	}
	return az
}

// place ties a workload's pods to its AZ's zone (required: a missing zone
// leaves them Pending with the scheduler's reason, never co-located with
// another AZ) and spreads them over the zone's nodes, as a director puts
// each instance on a VM of its own. The spread is soft, so a zone of one
// node still runs them all, and a drain can move one onto the zone's other
// nodes; selector selects the workload's own pods.
func (b *builder) place(t *corev1.PodTemplateSpec, az string, selector map[string]string) {
	t.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
		MaxSkew:           1,
		TopologyKey:       corev1.LabelHostname,
		WhenUnsatisfiable: corev1.ScheduleAnyway,
		LabelSelector:     &metav1.LabelSelector{MatchLabels: selector},
	}}
	if az == "" || b.opts.Placement.NoZoneAffinity {
		return
	}
	if b.res.Zones == nil {
		b.res.Zones = map[string]string{}
	}
	b.res.Zones[az] = b.opts.Placement.Zone(az)
	t.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{
				Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{b.opts.Placement.Zone(az)},
			}},
		}}},
	}}
}

// MissingZones warns of each AZ whose zone none of a cluster's nodes'
// zones (their topology.kubernetes.io/zone labels) is.
func MissingZones(required map[string]string, nodeZones []string) []string {
	var out []string
	for _, az := range slices.Sorted(maps.Keys(required)) {
		if z := required[az]; !slices.Contains(nodeZones, z) {
			out = append(out, fmt.Sprintf("AZ '%s': no node of the cluster is in zone '%s' (label %s): its pods stay Pending until one is; map the AZ to a zone with --az-zone %s=ZONE, or leave placement to the scheduler with --no-zone-affinity",
				az, z, corev1.LabelTopologyZone, az))
		}
	}
	return out
}

// disruptionBudget lets a node drain evict at most as many of a service
// group's instances at once as a deploy updates (its max_in_flight, counted
// per AZ as the deploy controller counts it), across its AZs' StatefulSets.
// An instance that is not Ready anyway may always be evicted: it counts
// against no one's availability, and a drain must not hang on it.
func (b *builder) disruptionBudget(g *manifest.InstanceGroup) (*policyv1.PodDisruptionBudget, error) {
	c, ok := b.update[g.Name]
	if !ok {
		// An errand's Job runs to completion: nothing to keep available.
		return nil, nil
	}
	n, err := c.InFlight(instance.Replicas(g.Instances, len(g.AZs)))
	if err != nil {
		return nil, fmt.Errorf("instance_groups.%s.update: %w", g.Name, err)
	}
	return &policyv1.PodDisruptionBudget{
		TypeMeta:   metav1.TypeMeta{APIVersion: "policy/v1", Kind: "PodDisruptionBudget"},
		ObjectMeta: b.meta(names.DNS1123LabelMax(b.m.Name+"-"+g.Name, maxWorkloadName)),
		Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable: ptr.To(intstr.FromInt32(int32(max(n, 1)))),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{
				names.LabelDeployment:    names.LabelValue(b.m.Name),
				names.LabelInstanceGroup: names.LabelValue(g.Name),
			}},
			UnhealthyPodEvictionPolicy: ptr.To(policyv1.AlwaysAllow),
		},
	}, nil
}
