package gathering

import (
	"slices"
	"testing"

	"github.com/bosh-injector/bosh-injector/gather/model/deployment"
	"github.com/bosh-injector/bosh-injector/gather/model/manifest"
)

// The webhook learns a service group's named disks from its BPM info; an
// errand's are left out, as `objects` maps none (a Job has no claims).
func TestBPMInfoNamedDisks(t *testing.T) {
	m := &manifest.Manifest{Name: "d"}
	disks := []manifest.NamedDisk{{Name: "index", Type: "small"}, {Name: "blob_store", Type: "large"}}
	for lifecycle, want := range map[string][]string{"service": {"index", "blob_store"}, "errand": nil} {
		g := &deployment.Group{Manifest: &manifest.InstanceGroup{Name: "g", Lifecycle: lifecycle, PersistentDisks: disks}}
		info, err := bpmInfo(m, g, nil)
		if err != nil || !slices.Equal(info.NamedDisks, want) {
			t.Errorf("%s: NamedDisks = %v, %v; want %v", lifecycle, info.NamedDisks, err, want)
		}
	}
}
