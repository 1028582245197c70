package objects_test

import (
	"maps"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"

	"github.com/bosh-injector/bosh-injector/gather/gathering/objects"
	"github.com/bosh-injector/bosh-injector/gather/names"
)

const zonesManifest = "name: d\nreleases: [{name: r, version: '1', image: img}]\n" +
	"update: {canaries: 1, max_in_flight: '50%', canary_watch_time: 1000, update_watch_time: 1000}\n" +
	"instance_groups:\n" +
	"- {name: api, azs: [z1, z2], instances: 4, jobs: [{name: j, release: r}]}\n" +
	"- {name: db, azs: [z1, z2], instances: 5, update: {max_in_flight: 2}, jobs: [{name: j, release: r}]}\n" +
	"- {name: flat, instances: 2, jobs: [{name: j, release: r}]}\n" +
	"- {name: smoke, azs: [z2], instances: 1, lifecycle: errand, jobs: [{name: j, release: r}]}\n"

// zoneOf is the zone a template requires, "" for none.
func zoneOf(t *testing.T, tmpl corev1.PodTemplateSpec) string {
	t.Helper()
	if tmpl.Spec.Affinity == nil {
		return ""
	}
	terms := tmpl.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	if len(terms) != 1 || len(terms[0].MatchExpressions) != 1 || terms[0].MatchExpressions[0].Key != corev1.LabelTopologyZone {
		t.Fatalf("unexpected node affinity %+v", terms)
	}
	return strings.Join(terms[0].MatchExpressions[0].Values, ",")
}

func templates(res objects.Result) map[string]corev1.PodTemplateSpec {
	out := map[string]corev1.PodTemplateSpec{}
	for _, o := range res.Objects {
		switch w := o.(type) {
		case *appsv1.StatefulSet:
			out[w.Name] = w.Spec.Template
		case *batchv1.Job:
			out[w.Name] = w.Spec.Template
		}
	}
	return out
}

// TestZoneAffinity: each AZ's pods require its zone, by default named as
// the AZ, else as mapped; none without AZs or when left to the scheduler;
// every workload spreads its own pods over nodes, softly.
func TestZoneAffinity(t *testing.T) {
	for _, c := range []struct {
		name string
		p    objects.Placement
		want map[string]string
	}{
		{"default", objects.Placement{}, map[string]string{"d-api-z1": "z1", "d-api-z2": "z2", "d-db-z1": "z1", "d-db-z2": "z2", "d-flat": "", "d-smoke-z2": "z2"}},
		{"mapped", objects.Placement{Zones: map[string]string{"z2": "eu-west-1b"}},
			map[string]string{"d-api-z1": "z1", "d-api-z2": "eu-west-1b", "d-db-z1": "z1", "d-db-z2": "eu-west-1b", "d-flat": "", "d-smoke-z2": "eu-west-1b"}},
		{"scheduler's", objects.Placement{NoZoneAffinity: true}, map[string]string{"d-api-z1": "", "d-api-z2": "", "d-db-z1": "", "d-db-z2": "", "d-flat": "", "d-smoke-z2": ""}},
	} {
		t.Run(c.name, func(t *testing.T) {
			res, err := objects.Build([]byte(zonesManifest), nil, objects.Options{Placement: c.p})
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for name, tmpl := range templates(res) {
				got[name] = zoneOf(t, tmpl)
				spread := tmpl.Spec.TopologySpreadConstraints
				if len(spread) != 1 || spread[0].TopologyKey != corev1.LabelHostname || spread[0].WhenUnsatisfiable != corev1.ScheduleAnyway ||
					!maps.Equal(spread[0].LabelSelector.MatchLabels, tmpl.Labels) {
					t.Errorf("%s: spread %+v, want a soft one over hostnames selecting %v", name, spread, tmpl.Labels)
				}
			}
			if !maps.Equal(got, c.want) {
				t.Errorf("zones %v, want %v", got, c.want)
			}
		})
	}
}

// TestDisruptionBudgets: one per service group, selecting all its AZs'
// pods, allowing max_in_flight of its largest AZ (as the deploy counts it);
// none for an errand.
func TestDisruptionBudgets(t *testing.T) {
	res, err := objects.Build([]byte(zonesManifest), nil, objects.Options{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, o := range res.Objects {
		pdb, ok := o.(*policyv1.PodDisruptionBudget)
		if !ok {
			continue
		}
		group := pdb.Spec.Selector.MatchLabels[names.LabelInstanceGroup]
		if len(pdb.Spec.Selector.MatchLabels) != 2 || pdb.Spec.Selector.MatchLabels[names.LabelDeployment] != "d" {
			t.Errorf("%s selects %v", pdb.Name, pdb.Spec.Selector.MatchLabels)
		}
		if *pdb.Spec.UnhealthyPodEvictionPolicy != policyv1.AlwaysAllow {
			t.Errorf("%s: unhealthy pods' eviction %s", pdb.Name, *pdb.Spec.UnhealthyPodEvictionPolicy)
		}
		got[group] = pdb.Spec.MaxUnavailable.IntValue()
	}
	// api: 50% of its AZs' 2 and 2; db: 2 of its 3 and 2; flat: 50% of 2.
	if want := map[string]int{"api": 1, "db": 2, "flat": 1}; !maps.Equal(got, want) {
		t.Errorf("budgets %v, want %v", got, want)
	}
}

func TestMissingZones(t *testing.T) {
	res, err := objects.Build([]byte(zonesManifest), nil, objects.Options{Placement: objects.Placement{Zones: map[string]string{"z2": "b"}}})
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"z1": "z1", "z2": "b"}; !maps.Equal(res.Zones, want) {
		t.Fatalf("zones %v, want %v", res.Zones, want)
	}
	if w := objects.MissingZones(res.Zones, []string{"z1", "b"}); len(w) != 0 {
		t.Errorf("warnings %v with every zone there", w)
	}
	w := objects.MissingZones(res.Zones, []string{"z1", "z1"})
	if len(w) != 1 || !strings.HasPrefix(w[0], "AZ 'z2': no node of the cluster is in zone 'b'") || !strings.Contains(w[0], "--az-zone z2=ZONE") {
		t.Errorf("warnings %v", w)
	}
	if w := objects.MissingZones(res.Zones, nil); len(w) != 2 {
		t.Errorf("warnings %v for a cluster without zones", w)
	}
}
