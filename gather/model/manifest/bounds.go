package manifest

import (
	"fmt"
	"math"
)

// MaxDeploymentInstances bounds the instances of all groups together, as
// MaxInstances bounds one group's: every instance is rendered and held
// until written, so many groups must not multiply the bound.
const MaxDeploymentInstances = 20000

// MaxMiB is the largest size in MiB whose bytes a Kubernetes quantity
// (an int64) holds.
const MaxMiB = math.MaxInt64 >> 20

func totalInstances(groups []InstanceGroup) error {
	total := 0
	for _, g := range groups {
		total += g.Instances
	}
	if total > MaxDeploymentInstances {
		return fmt.Errorf("instance_groups: %d instances in all, more than the %d a deployment may have", total, MaxDeploymentInstances)
	}
	return nil
}
