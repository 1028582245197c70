package manifest

import (
	"fmt"

	"github.com/bosh-injector/bosh-injector/gather/model/yamlvalue"
)

// NamedDisk is an entry of an instance group's `persistent_disks`: a disk
// the director attaches but does not mount (not the "managed" disk of
// persistent_disk/persistent_disk_type, which the agent mounts at
// /var/vcap/store), offered to jobs as a link of type disk.
type NamedDisk struct {
	Name string
	// Type is a disk type of the cloud config, which sizes it.
	Type string
}

// namedDisks parses `persistent_disks` with the director's checks and
// texts (instance_group_spec_parser.rb parse_disks).
func namedDisks(e *yamlvalue.Map, p, group string) ([]NamedDisk, error) {
	if !e.Has("persistent_disks") {
		return nil, nil
	}
	n := 0
	for _, k := range []string{"persistent_disk", "persistent_disk_type", "persistent_disks"} {
		if v, _ := e.Get(k); v != nil {
			n++
		}
	}
	if n > 1 {
		return nil, fmt.Errorf("Instance group '%s' specifies more than one of the following keys: 'persistent_disk', 'persistent_disk_type', and 'persistent_disks'. Choose one.", group)
	}
	var disks []NamedDisk
	seen := map[string]bool{}
	err := eachMap(e, p, "persistent_disks", func(dp string, de *yamlvalue.Map) error {
		name, err := str(de, dp, "name", false)
		if err != nil {
			return err
		}
		typ, err := str(de, dp, "type", false)
		if err != nil {
			return err
		}
		if typ == "" {
			return fmt.Errorf("Instance group '%s' persistent_disks's section references an unknown disk type ''", group)
		}
		if name == "" {
			return fmt.Errorf("Instance group '%s' persistent_disks's section contains a disk with no name", group)
		}
		if seen[name] {
			return fmt.Errorf("Instance group '%s' persistent_disks's section contains duplicate names", group)
		}
		seen[name] = true
		disks = append(disks, NamedDisk{Name: name, Type: typ})
		return nil
	})
	return disks, err
}
