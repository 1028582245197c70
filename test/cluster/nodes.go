package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// maxNodes keeps every node's pod subnet of every slot apart within
// podCIDR: node i of slot s has 10.244.(s + maxSlots*i).0/24.
const maxNodes = 256 / maxSlots

// Node is one node of the cluster, as kind makes one container a node:
// its own network namespace, containerd, kubelet and kube-proxy. Node 0
// shares its namespace with the control plane; every other node's joins
// node 0's bridge through a veth pair, with routes to each node's pods.
type Node struct {
	// Name is the Node's name and its kubernetes.io/hostname label.
	Name string
	// Zone is its topology.kubernetes.io/zone label; "" for none.
	Zone string
	// IP is its address on the nodes' bridge.
	IP    string
	index int
	rec   *record
	// dir holds its containerd's, CNI's and kubelet's files.
	dir string
}

func newNode(rec *record, dir string, index int, zone string) *Node {
	n := &Node{Name: "bosh-injector-node", Zone: zone, IP: fmt.Sprintf("10.200.0.%d", index+1), index: index, rec: rec, dir: dir}
	if index > 0 {
		n.Name += "-" + strconv.Itoa(index+1)
		n.dir = filepath.Join(dir, "nodes", n.Name)
	}
	return n
}

// netns is node 0's the cluster's namespace, every other's one of its own.
func (n *Node) netns() string {
	if n.index == 0 {
		return n.rec.netns()
	}
	return n.rec.netns() + "-" + strconv.Itoa(n.index)
}

func (n *Node) netnsPath() string { return "/run/netns/" + n.netns() }

// cgroup is the node's kubelet's cgroup root, inside the cluster's (node
// 0's is the cluster's): killing a node kills its subtree only.
func (n *Node) cgroup() string {
	if n.index == 0 {
		return n.rec.cgroup()
	}
	return n.rec.cgroup() + "/node-" + strconv.Itoa(n.index)
}

func (n *Node) podSubnet() string {
	return fmt.Sprintf("10.244.%d.0/24", n.rec.Slot+maxSlots*n.index)
}

// runDir is the node's directory at a short path, outside the cluster's
// directory (which is under TMPDIR, of any length): its kubelet's root
// directory, from which the kubelet and the CSI driver derive their
// sockets' paths, and containerd's sockets. A unix socket's path has at
// most 107 bytes.
func (n *Node) runDir() string {
	return filepath.Join(n.rec.nodesDir(), "n"+strconv.Itoa(n.index+1))
}

func (n *Node) containerdSocket() string {
	return filepath.Join(n.runDir(), "containerd.sock")
}

// kubeletDir is the node's kubelet's --root-dir: its pods' volumes, its
// pod-resources socket, and the plugin sockets (plugins/,
// plugins_registry/) of the CSI driver.
func (n *Node) kubeletDir() string { return filepath.Join(n.runDir(), "kubelet") }

// sockets are the paths of every unix socket the node's daemons listen
// on, the longest each may be: containerd's (gRPC, ttrpc), its shims' and
// runc's console sockets (containerd's XDG_RUNTIME_DIR is the run
// directory: os.MkdirTemp adds up to 10 digits), the kubelet's
// pod-resources and device-plugin sockets, and the CSI driver's plugin and
// registration sockets (test/tools/csi names them after --kubelet-dir).
func (n *Node) sockets() []string {
	return []string{
		n.containerdSocket(), n.containerdSocket() + ".ttrpc",
		shimSocket(n.containerdSocket(), "k8s.io", strings.Repeat("f", 64), "/debug"),
		filepath.Join(n.runDir(), "pty4294967295", "pty.sock"),
		filepath.Join(n.kubeletDir(), "pod-resources", "kubelet.sock"),
		// A constant of the kubelet's, the same for every node.
		"/var/lib/kubelet/device-plugins/kubelet.sock",
		filepath.Join(n.kubeletDir(), "plugins", "disks.sock"),
		filepath.Join(n.kubeletDir(), "plugins_registry", "disks.sock"),
	}
}

// logName is the node's log file of a daemon: node 0's plain, as a
// one-node cluster has always named them.
func (n *Node) logName(daemon string) string {
	if n.index == 0 {
		return daemon
	}
	return daemon + "-" + n.Name
}

// createNodeNetwork makes node n's namespace (n > 0) joined to node 0's
// bridge, with routes both ways to each node's pod subnet: from this
// machine through node 0, from node 0 and every other node directly.
func (r *record) createNodeNetwork(n *Node, all []*Node) error {
	peer := "nd" + strconv.Itoa(n.index)
	steps := [][]string{
		{"netns", "add", n.netns()},
		{"-n", r.netns(), "link", "add", peer, "type", "veth", "peer", "name", "eth0", "netns", n.netns()},
		{"-n", r.netns(), "link", "set", peer, "master", "node0"},
		{"-n", r.netns(), "link", "set", peer, "up"},
		{"-n", n.netns(), "link", "set", "lo", "up"},
		{"-n", n.netns(), "addr", "add", n.IP + "/24", "dev", "eth0"},
		{"-n", n.netns(), "link", "set", "eth0", "up"},
		// The control plane, the registry (on node 0's veth to this
		// machine) and Service addresses before kube-proxy's DNAT.
		{"-n", n.netns(), "route", "add", "default", "via", all[0].IP},
		{"-n", r.netns(), "route", "add", n.podSubnet(), "via", n.IP, "dev", "node0"},
		{"route", "add", n.podSubnet(), "via", r.innerIP(), "dev", r.hostVeth()},
	}
	for _, o := range all[1:] {
		if o != n {
			steps = append(steps, []string{"-n", n.netns(), "route", "add", o.podSubnet(), "via", o.IP})
		}
	}
	if err := ipSteps(steps); err != nil {
		return err
	}
	return nsSysctls(n.netnsPath())
}

func ipSteps(steps [][]string) error {
	for _, s := range steps {
		if out, err := exec.Command("ip", s...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %s: %v: %s", strings.Join(s, " "), err, out)
		}
	}
	return nil
}

// nsSysctls lets a node's namespace route pods' packets through
// iptables, as kube-proxy needs.
func nsSysctls(netns string) error {
	for key, value := range map[string]string{"net.ipv4.ip_forward": "1", "net.bridge.bridge-nf-call-iptables": "1"} {
		if out, err := exec.Command("nsenter", "--net="+netns, "--", "sysctl", "-qw", key+"="+value).CombinedOutput(); err != nil {
			hint := ""
			if strings.Contains(key, "bridge") {
				hint = " (the br_netfilter kernel module must be loaded: modprobe br_netfilter)"
			}
			return fmt.Errorf("sysctl %s=%s in namespace %s: %v: %s%s", key, value, netns, err, out, hint)
		}
	}
	return nil
}

// Node is the node named name.
func (c *Cluster) Node(name string) (*Node, error) {
	for _, n := range c.Nodes {
		if n.Name == name {
			return n, nil
		}
	}
	return nil, fmt.Errorf("the cluster has no node %q", name)
}

// KillNode kills every process of a node other than the first (which
// shares the control plane's namespace): its kubelet, containerd,
// kube-proxy and every container, as a machine that lost its power. Its
// Node object and pods stay until the control plane notices.
func (c *Cluster) KillNode(name string) error {
	n, err := c.Node(name)
	if err != nil {
		return err
	}
	if n.index == 0 {
		return errors.New("node " + name + " holds the control plane: kill another")
	}
	hierarchies, err := cgroupHierarchies()
	if err != nil {
		return err
	}
	return killCgroup(filepath.Join(hierarchies[0], n.cgroup()))
}

// nodeReady says whether the Node named name reports Ready.
func (c *Cluster) nodeReady(ctx context.Context, name string) bool {
	node, err := c.Clientset.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return false
	}
	for _, cond := range node.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// nodeZones checks Options' Nodes and Zones and returns each node's zone.
func nodeZones(opts Options) ([]string, error) {
	nodes := opts.Nodes
	if nodes == 0 {
		nodes = max(len(opts.Zones), 1)
	}
	switch {
	case nodes > maxNodes:
		return nil, fmt.Errorf("a test cluster has at most %d nodes, not %d", maxNodes, nodes)
	case len(opts.Zones) == 0:
		return make([]string, nodes), nil
	case len(opts.Zones) != nodes:
		return nil, fmt.Errorf("%d zones (%s) for %d nodes: name one zone per node, in order", len(opts.Zones), strings.Join(opts.Zones, ","), nodes)
	}
	return opts.Zones, nil
}

// rss is the resident memory of every process in a cgroup subtree, in
// bytes.
func rss(cgroup string) int64 {
	var total int64
	for _, pid := range cgroupPIDs(cgroup) {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/statm", pid))
		if err != nil {
			continue
		}
		f := strings.Fields(string(data))
		if len(f) > 1 {
			pages, _ := strconv.ParseInt(f[1], 10, 64)
			total += pages * int64(os.Getpagesize())
		}
	}
	return total
}
