package manifest

import "testing"

// persistent_disks is parsed with the director's checks and texts
// (instance_group_spec_parser.rb parse_disks).
func TestNamedDisks(t *testing.T) {
	group := func(disks string) string {
		return `{name: d, instance_groups: [{name: db, instances: 1, ` + disks + `}]}`
	}
	m, err := Parse([]byte(group(`persistent_disks: [{name: low-iops, type: gp2}, {name: high_iops, type: io1}]`)))
	if err != nil {
		t.Fatal(err)
	}
	if got := m.InstanceGroups[0].PersistentDisks; len(got) != 2 || got[0] != (NamedDisk{"low-iops", "gp2"}) || got[1] != (NamedDisk{"high_iops", "io1"}) {
		t.Errorf("PersistentDisks = %+v", got)
	}
	for _, tc := range []struct{ disks, err string }{
		{`persistent_disks: [{name: a, type: gp2}, {name: a, type: io1}]`, "Instance group 'db' persistent_disks's section contains duplicate names"},
		{`persistent_disks: [{type: gp2}]`, "Instance group 'db' persistent_disks's section contains a disk with no name"},
		{`persistent_disks: [{name: a}]`, "Instance group 'db' persistent_disks's section references an unknown disk type ''"},
		{`persistent_disks: [{name: a, type: gp2}], persistent_disk: 1024`, "Instance group 'db' specifies more than one of the following keys: 'persistent_disk', 'persistent_disk_type', and 'persistent_disks'. Choose one."},
		{`persistent_disks: [{name: a, type: gp2}], persistent_disk_type: gp2`, "Instance group 'db' specifies more than one of the following keys: 'persistent_disk', 'persistent_disk_type', and 'persistent_disks'. Choose one."},
		{`persistent_disks: {name: a}`, "instance_groups[0].persistent_disks: expected a list, got a hash"},
	} {
		_, err := Parse([]byte(group(tc.disks)))
		if err == nil || err.Error() != tc.err {
			t.Errorf("%s: error = %v, want %s", tc.disks, err, tc.err)
		}
	}
}
