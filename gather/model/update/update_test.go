package update

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	"github.com/bosh-injector/bosh-injector/gather/model/yamlvalue"
)

func parse(t *testing.T, doc string) *yamlvalue.Map {
	t.Helper()
	v, err := yamlvalue.ParsePsych([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return v.(*yamlvalue.Map)
}

func TestPlanOf(t *testing.T) {
	root := parse(t, `
update: {canaries: 2, max_in_flight: "50%", canary_watch_time: 1000-30000, update_watch_time: 5000}
instance_groups:
- name: db
  instances: 3
  azs: [z1, z2]
- name: api
  instances: 0
  update: {canaries: 1, max_in_flight: 1, serial: false}
- name: worker
  update: {serial: false, update_watch_time: "2000 - 4000"}
- name: smoke-tests
  lifecycle: errand
- name: router
`)
	plan, err := PlanOf(root)
	if err != nil {
		t.Fatal(err)
	}
	want := Plan{
		{Name: "db", Update: Config{Canaries: "2", MaxInFlight: "50%", CanaryWatch: Watch{time.Second, 30 * time.Second}, UpdateWatch: Watch{5 * time.Second, 5 * time.Second}, Serial: true}, Instances: ptr.To(3), AZs: 2},
		{Name: "api", Update: Config{Canaries: "1", MaxInFlight: "1", CanaryWatch: Watch{time.Second, 30 * time.Second}, UpdateWatch: Watch{5 * time.Second, 5 * time.Second}}, Instances: ptr.To(0)},
		{Name: "worker", Update: Config{Canaries: "2", MaxInFlight: "50%", CanaryWatch: Watch{time.Second, 30 * time.Second}, UpdateWatch: Watch{2 * time.Second, 4 * time.Second}}},
		{Name: "router", Update: Config{Canaries: "2", MaxInFlight: "50%", CanaryWatch: Watch{time.Second, 30 * time.Second}, UpdateWatch: Watch{5 * time.Second, 5 * time.Second}, Serial: true}},
	}
	if !reflect.DeepEqual(plan, want) {
		t.Fatalf("plan:\n%+v\nwant:\n%+v", plan, want)
	}
	var stages [][]string
	for _, s := range plan.Stages() {
		var names []string
		for _, g := range s {
			names = append(names, g.Name)
		}
		stages = append(stages, names)
	}
	if want := [][]string{{"db"}, {"api", "worker"}, {"router"}}; !reflect.DeepEqual(stages, want) {
		t.Fatalf("stages %v, want %v", stages, want)
	}
}

func TestPlanErrors(t *testing.T) {
	for doc, want := range map[string]string{
		`instance_groups: []`: "Required property 'update'",
		`update: {canaries: 1, max_in_flight: 1, canary_watch_time: 1000}`:                                                                               "update.update_watch_time: Required property 'update_watch_time' was not specified",
		`update: {canaries: 1, max_in_flight: lots, canary_watch_time: 1, update_watch_time: 1}`:                                                         `update.max_in_flight: "lots" cannot be calculated`,
		`update: {canaries: 1, max_in_flight: 1, canary_watch_time: 30-1, update_watch_time: 1}`:                                                         "update.canary_watch_time: Min watch time cannot be greater than max watch time",
		`update: {canaries: 1, max_in_flight: 1, canary_watch_time: soon, update_watch_time: 1}`:                                                         "update.canary_watch_time: Watch time should be an integer or a range of two integers",
		`update: {canaries: [1], max_in_flight: 1, canary_watch_time: 1, update_watch_time: 1}`:                                                          "update.canaries: Property 'canaries' value ([1]) did not match the required type 'String'",
		`update: {canaries: 1, max_in_flight: 1, canary_watch_time: 1, update_watch_time: 1, serial: "no"}`:                                              "update.serial: Property 'serial' value (no) did not match",
		"update: {canaries: 1, max_in_flight: 1, canary_watch_time: 1, update_watch_time: 1}\ninstance_groups:\n- name: api\n  update: {canaries: 10%5}": "instance_groups.api.update.canaries:",
	} {
		_, err := PlanOf(parse(t, doc))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want an error containing %q", doc, err, want)
		}
	}
}

func TestSteps(t *testing.T) {
	for _, c := range []struct {
		name                  string
		canaries, maxInFlight string
		sizes                 []int
		want                  []Step
	}{
		// The acceptance case: 3 instances in 2 AZs, one canary, one at a
		// time: the canary and the other instance of z1, then z2's.
		{"one canary, one at a time", "1", "1", []int{2, 1}, []Step{{0, 1, true}, {0, 1, false}, {1, 1, false}}},
		{"canaries beyond max_in_flight go max_in_flight at a time", "3", "2", []int{4}, []Step{{0, 2, true}, {0, 1, true}, {0, 1, false}}},
		{"canaries only in the first AZ with instances", "1", "10", []int{0, 3, 3}, []Step{{1, 1, true}, {1, 2, false}, {2, 3, false}}},
		{"percentages of each AZ's size, at least one", "0", "50%", []int{4, 1}, []Step{{0, 2, false}, {0, 2, false}, {1, 1, false}}},
		{"more canaries than instances", "5", "1", []int{2}, []Step{{0, 1, true}, {0, 1, true}}},
		{"no instances", "1", "1", []int{0}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := Config{Canaries: c.canaries, MaxInFlight: c.maxInFlight}.Steps(c.sizes)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("steps %+v, want %+v", got, c.want)
			}
		})
	}
}

func TestCount(t *testing.T) {
	for value, want := range map[string]int{"3": 3, "25%": 2, "100%": 10, "150%": 10, "0%": 0, "+2": 2} {
		if got, err := count(value, 10); err != nil || got != want {
			t.Errorf("count(%q, 10) = %d, %v; want %d", value, got, err, want)
		}
	}
	for _, value := range []string{"lots", "-1", "1.5", "%", "99999999999999999999"} {
		if _, err := count(value, 10); err == nil {
			t.Errorf("count(%q) succeeded", value)
		}
	}
}

func TestInFlight(t *testing.T) {
	for _, c := range []struct {
		max   string
		sizes []int
		want  int
	}{
		{"1", []int{2, 2}, 1},
		{"3", []int{2, 1}, 2},
		{"50%", []int{4, 2}, 2},
		// At least one, as the director updates at least one.
		{"10%", []int{3, 3}, 1},
		{"0", []int{1}, 1},
		{"2", []int{0, 0}, 0},
	} {
		got, err := Config{Canaries: "1", MaxInFlight: c.max}.InFlight(c.sizes)
		if err != nil || got != c.want {
			t.Errorf("max_in_flight %s over %v: %d, %v; want %d", c.max, c.sizes, got, err, c.want)
		}
	}
}
