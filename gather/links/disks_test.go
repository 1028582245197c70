package links_test

import (
	"testing"
)

// Disk links: each of a group's persistent_disks provides a link of type
// disk named like the disk, whose content is the director's DiskLink spec
// (unmanaged_persistent_disks_spec.rb: `link(x).p('name')` is the disk's
// name), resolved explicitly with `from` or implicitly by type.
func TestDiskLinks(t *testing.T) {
	specs["disk-user"] = "name: disk-user\nconsumes: [{name: slow, type: disk}, {name: fast, type: disk, optional: true}]"
	defer delete(specs, "disk-user")
	group := func(disks, consumes string) string {
		return "- {name: db, instances: 1, persistent_disks: [" + disks + "], jobs: [{name: disk-user, release: pg" + consumes + "}]}\n"
	}
	content := func(disk string) string {
		return `{"deployment_name":"dep","properties":{"name":"` + disk + `"},"networks":[],"instances":[]}`
	}
	tests := []struct {
		name, groups, want, err string
	}{
		{"from", group("{name: low-iops, type: gp2}, {name: high_iops, type: io1}", ", consumes: {slow: {from: low-iops}, fast: {from: high_iops}}"),
			`{"slow":` + content("low-iops") + `,"fast":` + content("high_iops") + `}`, ""},
		{"implicit by type", group("{name: data, type: gp2}", ""),
			`{"slow":` + content("data") + `,"fast":` + content("data") + `}`, ""},
		{"implicit, two disks", group("{name: a, type: gp2}, {name: b, type: gp2}", ", consumes: {fast: nil}"), "", wrapper +
			"  - Failed to resolve link 'slow' with type 'disk' from job 'disk-user' in instance group 'db'. Multiple link providers found:\n" +
			"    - Disk link provider 'a' from instance group 'db'\n" +
			"    - Disk link provider 'b' from instance group 'db'"},
		{"network", group("{name: a, type: gp2}", ", consumes: {slow: {from: a, network: default}, fast: nil}"), "", wrapper +
			"  - Failed to resolve link 'slow' with alias 'a' and type 'disk' from job 'disk-user' in instance group 'db'. Details below:\n" +
			"    - Disk link provider 'a' from instance group 'db' does not contain any networks"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := resolve(t, tc.groups)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("error:\n%v\nwant:\n%s", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got["db/disk-user"] != tc.want {
				t.Errorf("got  %s\nwant %s", got["db/disk-user"], tc.want)
			}
		})
	}
}
