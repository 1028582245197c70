package cluster

import (
	"slices"
	"strings"
	"testing"
)

func TestNodeZones(t *testing.T) {
	for _, c := range []struct {
		opts Options
		want []string
		err  string
	}{
		{Options{}, []string{""}, ""},
		{Options{Nodes: 2}, []string{"", ""}, ""},
		{Options{Zones: []string{"z1", "z1", "z2"}}, []string{"z1", "z1", "z2"}, ""},
		{Options{Nodes: 3, Zones: []string{"z1", "z1", "z2"}}, []string{"z1", "z1", "z2"}, ""},
		{Options{Nodes: 3, Zones: []string{"z1", "z2"}}, nil, "2 zones (z1,z2) for 3 nodes"},
		{Options{Nodes: 5}, nil, "at most 4 nodes, not 5"},
	} {
		got, err := nodeZones(c.opts)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%+v: error %v, want %q", c.opts, err, c.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("%+v: %q, %v; want %q", c.opts, got, err, c.want)
		}
	}
}

// TestNodeNames: every node of every slot has its own name, namespace,
// cgroup and pod subnet within the cluster CIDR; the first keeps the
// one-node cluster's.
func TestNodeNames(t *testing.T) {
	seen := map[string]bool{}
	for slot := range maxSlots {
		rec := &record{Slot: slot}
		for i := range maxNodes {
			n := newNode(rec, "/d", i, "")
			if seen[n.podSubnet()] || !strings.HasPrefix(n.podSubnet(), "10.244.") {
				t.Fatalf("slot %d node %d: subnet %s", slot, i, n.podSubnet())
			}
			seen[n.podSubnet()] = true
			if i == 0 && (n.Name != "bosh-injector-node" || n.netns() != rec.netns() || n.cgroup() != rec.cgroup() || n.dir != "/d" || n.podSubnet() != rec.podSubnet()) {
				t.Errorf("first node %+v differs from the one-node cluster's", n)
			}
			if i > 0 && (n.netns() == rec.netns() || !strings.HasPrefix(n.cgroup(), rec.cgroup()+"/") || n.dir == "/d") {
				t.Errorf("node %d shares the first one's namespace, cgroup or directory: %+v", i, n)
			}
		}
	}
}

// TestSocketPaths: every unix socket of every node of every slot has a
// path bind(2) takes (at most 107 bytes) and a socket of its own, however
// long TMPDIR, which holds the cluster's directory, is: issue 47's
// three-node demo failed from a TMPDIR a few characters longer than /tmp.
// TestCluster starts a cluster from such a TMPDIR.
func TestSocketPaths(t *testing.T) {
	tmpdir := "/" + strings.Repeat("a-long-tmpdir/", 11) + "end"
	if len(tmpdir) < 150 {
		t.Fatalf("TMPDIR of %d bytes", len(tmpdir))
	}
	dir := tmpdir + "/bosh-injector-cluster-1234567890"
	seen := map[string]bool{}
	for slot := range maxSlots {
		rec := &record{Slot: slot, Dir: dir}
		for i := range maxNodes {
			n := newNode(rec, dir, i, "")
			for _, s := range n.sockets() {
				if len(s) > 107 {
					t.Errorf("slot %d node %d: socket %s has %d bytes", slot, i, s, len(s))
				}
				if strings.HasPrefix(s, dir) {
					t.Errorf("slot %d node %d: socket %s is under the cluster's directory", slot, i, s)
				}
				if seen[s] && s != "/var/lib/kubelet/device-plugins/kubelet.sock" {
					t.Errorf("slot %d node %d: socket %s is another node's too", slot, i, s)
				}
				seen[s] = true
			}
		}
	}
}
