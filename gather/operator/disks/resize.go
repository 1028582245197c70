package disks

import (
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/bosh-injector/bosh-injector/gather/model/update"
)

// slot is one instance of a group: a StatefulSet's pod ordinal.
type slot struct {
	set     *appsv1.StatefulSet
	ordinal int
}

// batches are a group's instances in the order a deploy updates them
// (update.Config.Steps: canaries in the first AZ, then max_in_flight at a
// time, AZ by AZ), each step's instances from the highest ordinal down as
// a deploy's lowered partition releases them. sets are in AZ order.
func batches(sets []*appsv1.StatefulSet, c update.Config) ([][]slot, error) {
	sizes := make([]int, len(sets))
	next := make([]int, len(sets))
	for i, s := range sets {
		sizes[i] = 1
		if s.Spec.Replicas != nil {
			sizes[i] = int(*s.Spec.Replicas)
		}
		next[i] = sizes[i] - 1
	}
	steps, err := c.Steps(sizes)
	if err != nil {
		return nil, err
	}
	out := make([][]slot, 0, len(steps))
	for _, st := range steps {
		b := make([]slot, 0, st.N)
		for range st.N {
			b = append(b, slot{set: sets[st.AZ], ordinal: next[st.AZ]})
			next[st.AZ]--
		}
		out = append(out, b)
	}
	return out, nil
}

// fallbackConfig is the update order of a group whose deployment has no
// accepted plan yet: one canary, then the StatefulSet's maxUnavailable
// (the objects' max_in_flight) at a time.
func fallbackConfig(s *appsv1.StatefulSet) update.Config {
	c := update.Config{Canaries: "1", MaxInFlight: "1"}
	if ru := s.Spec.UpdateStrategy.RollingUpdate; ru != nil && ru.MaxUnavailable != nil {
		c.MaxInFlight = ru.MaxUnavailable.String()
		if ru.MaxUnavailable.Type == intstr.Int && ru.MaxUnavailable.IntVal < 1 {
			c.MaxInFlight = "1"
		}
	}
	return c
}
