package objects

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/bosh-injector/bosh-injector/gather/deployment"
	"github.com/bosh-injector/bosh-injector/gather/manifest"
	"github.com/bosh-injector/bosh-injector/gather/yamlvalue"
)

// MaxSecretSize is what the API server accepts in one Secret's data.
const MaxSecretSize = 1 << 20

// checkSecretSize fails when the manifest and its ops files would make a
// manifest Secret the API server refuses.
func checkSecretSize(name string, manifestYAML []byte, ops []deployment.OpsFile) error {
	n := len(manifestYAML)
	for _, op := range ops {
		n += len(op.Data)
	}
	if n > MaxSecretSize {
		return fmt.Errorf("the manifest Secret '%s' would hold %d bytes (the manifest and its ops files), more than the %d (1 MiB) a Secret may hold", name, n, MaxSecretSize)
	}
	return nil
}

// checkUpdates fails, naming the key, on a max_in_flight that is not what
// BOSH accepts and a rolling update's maxUnavailable can take: a positive
// integer (also as a string) or a percentage from 1% to 100%.
func checkUpdates(m *manifest.Manifest) error {
	if err := checkMaxInFlight(m.Raw, "update"); err != nil {
		return err
	}
	for _, g := range m.InstanceGroups {
		if err := checkMaxInFlight(g.Raw, "instance_groups."+g.Name+".update"); err != nil {
			return err
		}
	}
	return nil
}

func checkMaxInFlight(owner *yamlvalue.Map, where string) error {
	v, _ := owner.Get("update")
	u, _ := v.(*yamlvalue.Map)
	if u == nil {
		return nil
	}
	mif, ok := u.Get("max_in_flight")
	if !ok {
		return nil
	}
	valid := false
	switch t := mif.(type) {
	case int64:
		valid = t >= 1 && t <= manifest.MaxInstances
	case string:
		if p, isPercent := strings.CutSuffix(t, "%"); isPercent {
			n, err := strconv.Atoi(p)
			valid = err == nil && n >= 1 && n <= 100
		} else {
			n, err := strconv.Atoi(t)
			valid = err == nil && n >= 1 && n <= manifest.MaxInstances
		}
	}
	if !valid {
		return fmt.Errorf("%s.max_in_flight: expected a number of instances from 1 to %d or a percentage from 1%% to 100%%, got %v", where, manifest.MaxInstances, mif)
	}
	return nil
}
