package cluster

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// What a cluster claims on this machine, all named after its slot N so that
// several clusters (parallel test packages, a kept sandbox) run side by
// side: a network namespace bosh-injector-N, a veth pair into it whose host
// end holds 10.213.N.1 and whose inner end 10.213.N.2 (where this machine
// reaches the apiserver and the registry), and a cgroup /bosh-injector-N in
// every hierarchy holding every process the cluster started.
const (
	stateRoot = "/run/bosh-injector/clusters"
	// nodesRoot holds, per slot, its nodes' run directories (Node.runDir):
	// their kubelets' root directories and containerd's sockets, at a
	// short path whatever TMPDIR is, as a kind node has /var/lib/kubelet.
	nodesRoot = "/var/lib/bosh-injector"
	maxSlots  = 64
	// The node's address inside the namespace, on a bridge with no ports
	// that also carries the default route: nothing leaves the namespace
	// but through the veth pair to this machine.
	nodeIP     = "10.200.0.1"
	podCIDR    = "10.244.0.0/16"
	serviceNet = "10.96.0.0/16"
	// APIServiceIP and DNSServiceIP are the first addresses of the service
	// range: the kubernetes Service and the cluster DNS Service.
	APIServiceIP = "10.96.0.1"
	DNSServiceIP = "10.96.0.10"
)

// record is what Start writes before it claims anything, so that a cluster
// whose process died (killed, interrupted) is torn down by the next Start
// or by Down.
type record struct {
	Slot int    `json:"slot"`
	Dir  string `json:"dir"`
	// Keep: the cluster outlives its process (make demo KEEP=1).
	Keep bool `json:"keep,omitempty"`
	// Sysctls are the values the kubelet rewrites, as they were before it
	// started.
	Sysctls map[string]string `json:"sysctls,omitempty"`
	// Nodes is how many nodes the cluster has, each but the first in a
	// namespace of its own.
	Nodes int `json:"nodes,omitempty"`
}

func (r *record) netns() string     { return "bosh-injector-" + strconv.Itoa(r.Slot) }
func (r *record) netnsPath() string { return "/run/netns/" + r.netns() }
func (r *record) hostVeth() string  { return "bih" + strconv.Itoa(r.Slot) }
func (r *record) innerVeth() string { return "bin" + strconv.Itoa(r.Slot) }
func (r *record) hostIP() string    { return fmt.Sprintf("10.213.%d.1", r.Slot) }
func (r *record) innerIP() string   { return fmt.Sprintf("10.213.%d.2", r.Slot) }
func (r *record) cgroup() string    { return "/bosh-injector-" + strconv.Itoa(r.Slot) }

// podSubnet is the node's pod addresses, one /24 per slot: this machine
// routes them through the veth pair, so a pod's address is reached from
// here as from any node of a cluster.
func (r *record) podSubnet() string { return fmt.Sprintf("10.244.%d.0/24", r.Slot) }
func (r *record) path() string      { return filepath.Join(stateRoot, strconv.Itoa(r.Slot)+".json") }
func (r *record) nodesDir() string  { return filepath.Join(nodesRoot, strconv.Itoa(r.Slot)) }
func lockPath(slot int) string      { return filepath.Join(stateRoot, strconv.Itoa(slot)+".lock") }
func (r *record) save() error       { return writeJSON(r.path(), r) }
func writeJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o600)
}

// claimSlot takes the first free slot, holding its lock file for as long as
// the returned file is open, after tearing down any slot whose cluster was
// left behind by a process that died.
func claimSlot() (*record, *os.File, error) {
	for slot := range maxSlots {
		lock, err := lockFile(lockPath(slot), false)
		if err != nil {
			return nil, nil, err
		}
		if lock == nil {
			continue
		}
		old, err := readRecord(slot)
		if err == nil && old.Keep {
			// A kept cluster: in use until `make demo-down`.
			lock.Close()
			continue
		}
		if err == nil {
			if err := old.teardown(); err != nil {
				lock.Close()
				return nil, nil, fmt.Errorf("removing the cluster a dead process left in slot %d: %w", slot, err)
			}
		}
		return &record{Slot: slot}, lock, nil
	}
	return nil, nil, fmt.Errorf("all %d test cluster slots are in use (see %s)", maxSlots, stateRoot)
}

// lockFile takes an exclusive lock on the file at path (under stateRoot),
// held while the returned file is open; without wait, a lock another
// process holds returns no file and no error.
func lockFile(path string, wait bool) (*os.File, error) {
	if err := os.MkdirAll(stateRoot, 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	how := syscall.LOCK_EX
	if !wait {
		how |= syscall.LOCK_NB
	}
	if err := syscall.Flock(int(f.Fd()), how); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, nil
		}
		return nil, err
	}
	return f, nil
}

func readRecord(slot int) (*record, error) {
	data, err := os.ReadFile(filepath.Join(stateRoot, strconv.Itoa(slot)+".json"))
	if err != nil {
		return nil, err
	}
	var r record
	return &r, json.Unmarshal(data, &r)
}

// Down tears down every kept cluster (make demo-down), and any left by a
// dead process; it says which.
func Down() ([]string, error) {
	var downed []string
	var errs []error
	for slot := range maxSlots {
		r, err := readRecord(slot)
		if err != nil {
			continue
		}
		lock, err := lockFile(lockPath(slot), false)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if lock == nil {
			// A live process runs this one and will tear it down.
			continue
		}
		errs = append(errs, r.teardown())
		lock.Close()
		downed = append(downed, fmt.Sprintf("cluster %d (%s)", slot, r.Dir))
	}
	return downed, errors.Join(errs...)
}

// createNetwork makes the namespace, the veth pair and the node's bridge.
func (r *record) createNetwork() error {
	steps := [][]string{
		{"netns", "add", r.netns()},
		{"link", "add", r.hostVeth(), "type", "veth", "peer", "name", r.innerVeth(), "netns", r.netns()},
		{"addr", "add", r.hostIP() + "/30", "dev", r.hostVeth()},
		{"link", "set", r.hostVeth(), "up"},
		{"-n", r.netns(), "link", "set", "lo", "up"},
		{"-n", r.netns(), "addr", "add", r.innerIP() + "/30", "dev", r.innerVeth()},
		{"-n", r.netns(), "link", "set", r.innerVeth(), "up"},
		{"-n", r.netns(), "link", "add", "node0", "type", "bridge"},
		{"-n", r.netns(), "addr", "add", nodeIP + "/24", "dev", "node0"},
		{"-n", r.netns(), "link", "set", "node0", "up"},
		// Service addresses need a route before kube-proxy's DNAT picks
		// their endpoint; this one leads nowhere else.
		{"-n", r.netns(), "route", "add", "default", "dev", "node0"},
		{"route", "add", r.podSubnet(), "via", r.innerIP(), "dev", r.hostVeth()},
	}
	if err := ipSteps(steps); err != nil {
		return err
	}
	return nsSysctls(r.netnsPath())
}

// cgroupHierarchies are the mounted cgroup v1 hierarchies (the kubelet
// needs its cgroup root in each).
func cgroupHierarchies() ([]string, error) {
	entries, err := os.ReadDir("/sys/fs/cgroup")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		path := filepath.Join("/sys/fs/cgroup", e.Name())
		if _, err := os.Stat(filepath.Join(path, "cgroup.procs")); err == nil && e.IsDir() {
			out = append(out, path)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no cgroup hierarchy mounted under /sys/fs/cgroup")
	}
	return out, nil
}

// createCgroups makes the cluster's cgroup root in every hierarchy, and
// in it each node's kubelet's cgroup root (the first node's is the
// cluster's) with the cgroup its daemons run in; cpuset copied from the
// parent, which a new cpuset cgroup lacks.
func (r *record) createCgroups(nodes []*Node) error {
	hierarchies, err := cgroupHierarchies()
	if err != nil {
		return err
	}
	for _, h := range hierarchies {
		var dirs []string
		for _, n := range nodes {
			if n.index > 0 {
				dirs = append(dirs, filepath.Join(h, n.cgroup()))
			}
			dirs = append(dirs, filepath.Join(h, n.cgroup(), "daemons"))
		}
		if err := os.MkdirAll(filepath.Join(h, r.cgroup()), 0o755); err != nil {
			return fmt.Errorf("the kubelet's cgroup root: %w", err)
		}
		for _, dir := range dirs {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return fmt.Errorf("the kubelet's cgroup root: %w", err)
			}
		}
		if filepath.Base(h) != "cpuset" {
			continue
		}
		for _, sub := range append([]string{filepath.Join(h, r.cgroup())}, dirs...) {
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				v, err := os.ReadFile(filepath.Join(h, f))
				if err != nil {
					return err
				}
				if err := os.WriteFile(filepath.Join(sub, f), v, 0o644); err != nil {
					return fmt.Errorf("%s: %w", filepath.Join(sub, f), err)
				}
			}
		}
	}
	return nil
}

// joinCgroup moves pid into the daemons cgroup under cgroup (a node's) in
// every hierarchy; what it forks later (containerd's shims) follows it
// there.
func (r *record) joinCgroup(pid int, cgroup string) error {
	hierarchies, err := cgroupHierarchies()
	if err != nil {
		return err
	}
	for _, h := range hierarchies {
		if err := os.WriteFile(filepath.Join(h, cgroup, "daemons", "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644); err != nil {
			return fmt.Errorf("moving PID %d into %s: %w", pid, cgroup, err)
		}
	}
	return nil
}

// killAll kills every process in the cluster's cgroups (daemons, shims,
// containers) until none is left.
func (r *record) killAll() error {
	hierarchies, err := cgroupHierarchies()
	if err != nil {
		return err
	}
	root := filepath.Join(hierarchies[0], r.cgroup())
	if _, err := os.Stat(root); err != nil {
		return nil
	}
	return killCgroup(root)
}

// killCgroup kills every process in the cgroup directory root and below
// until none is left.
func killCgroup(root string) error {
	for deadline := time.Now().Add(20 * time.Second); ; {
		pids := cgroupPIDs(root)
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes %v in cgroup %s survived SIGKILL", pids, root)
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// cgroupPIDs are the processes in the cgroup directory root and below.
func cgroupPIDs(root string) []int {
	var pids []int
	_ = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err == nil && d.Name() == "cgroup.procs" {
			data, _ := os.ReadFile(path)
			for _, f := range strings.Fields(string(data)) {
				if pid, err := strconv.Atoi(f); err == nil {
					pids = append(pids, pid)
				}
			}
		}
		return nil
	})
	return pids
}

// removeCgroups removes the cluster's cgroups, deepest first.
func (r *record) removeCgroups() error {
	hierarchies, err := cgroupHierarchies()
	if err != nil {
		return err
	}
	var errs []error
	for _, h := range hierarchies {
		var dirs []string
		_ = filepath.WalkDir(filepath.Join(h, r.cgroup()), func(path string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
		slices.Reverse(dirs)
		for _, d := range dirs {
			// An emptied cgroup can stay busy for a moment.
			for i := 0; ; i++ {
				err := syscall.Rmdir(d)
				if err == nil || errors.Is(err, syscall.ENOENT) {
					break
				}
				if i == 100 {
					errs = append(errs, fmt.Errorf("removing cgroup %s: %w", d, err))
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
	}
	return errors.Join(errs...)
}

// unmountUnder detaches every mount below dir (overlay roots, the
// kubelet's Secret and token tmpfs, the pods' network namespaces), deepest
// first.
func unmountUnder(dir string) error {
	var errs []error
	for range 5 {
		data, err := os.ReadFile("/proc/self/mountinfo")
		if err != nil {
			return err
		}
		var points []string
		for _, line := range strings.Split(string(data), "\n") {
			f := strings.Fields(line)
			if len(f) > 4 && (f[4] == dir || strings.HasPrefix(f[4], dir+"/")) {
				points = append(points, f[4])
			}
		}
		if len(points) == 0 {
			return nil
		}
		slices.SortFunc(points, func(a, b string) int { return len(b) - len(a) })
		errs = errs[:0]
		for _, p := range points {
			if err := syscall.Unmount(p, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
				errs = append(errs, fmt.Errorf("unmounting %s: %w", p, err))
			}
		}
	}
	return errors.Join(errs...)
}

// shimSockets are the sockets of the cluster's containerd shims: they live
// outside its directory, named by containerd's shim.SocketAddress after its
// address, namespace and task, and a killed shim leaves its own behind.
func (r *record) shimSockets() []string {
	if r.Dir == "" {
		return nil
	}
	var out []string
	for i := range max(r.Nodes, 1) {
		n := newNode(r, r.Dir, i, "")
		tasks, _ := os.ReadDir(filepath.Join(n.dir, "containerd", "state", "io.containerd.runtime.v2.task", "k8s.io"))
		for _, t := range tasks {
			for _, suffix := range []string{"", "/debug"} {
				out = append(out, shimSocket(n.containerdSocket(), "k8s.io", t.Name(), suffix))
			}
		}
	}
	return out
}

// shimSocket is the socket of the shim of task id in namespace ns of the
// containerd at address (suffix "/debug" its debug socket), as
// containerd's shim.SocketAddress names it.
func shimSocket(address, ns, id, suffix string) string {
	sum := sha256.Sum256([]byte(filepath.Join(address, ns, id) + suffix))
	return fmt.Sprintf("/run/containerd/s/%x", sum)
}

// removeNodesDir removes what a cluster of the slot left in its nodes'
// run directories (the machine restarted under a kept one: its record
// went with /run, /var/lib stays), detaching what is mounted there first.
func (r *record) removeNodesDir() error {
	if err := unmountUnder(r.nodesDir()); err != nil {
		return err
	}
	return os.RemoveAll(r.nodesDir())
}

// teardown removes everything the record names: processes, mounts, the
// namespace and veth pair, cgroups and files; and puts the sysctls back.
func (r *record) teardown() error {
	var errs []error
	sockets := r.shimSockets()
	errs = append(errs, r.killAll())
	for _, s := range sockets {
		if err := os.Remove(s); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	errs = append(errs, unmountUnder(r.nodesDir()))
	if r.Dir != "" {
		errs = append(errs, unmountUnder(r.Dir), detachLoops(r.Dir))
	}
	namespaces := []string{r.netns()}
	for i := 1; i < r.Nodes; i++ {
		namespaces = append(namespaces, r.netns()+"-"+strconv.Itoa(i))
	}
	for _, ns := range namespaces {
		if _, err := os.Stat("/run/netns/" + ns); err == nil {
			if out, err := exec.Command("ip", "netns", "delete", ns).CombinedOutput(); err != nil {
				errs = append(errs, fmt.Errorf("ip netns delete %s: %v: %s", ns, err, out))
			}
		}
	}
	// Deleting the namespace deleted the veth pair; one that remains had
	// lost its peer before.
	if exec.Command("ip", "link", "show", r.hostVeth()).Run() == nil {
		_ = exec.Command("ip", "link", "delete", r.hostVeth()).Run()
	}
	errs = append(errs, r.removeCgroups(), restoreSysctls(r.Sysctls), os.RemoveAll(r.nodesDir()))
	if r.Dir != "" {
		errs = append(errs, os.RemoveAll(r.Dir))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if err := os.Remove(r.path()); err != nil {
		return err
	}
	removeKubeletSocket()
	return restoreInotify()
}

// removeKubeletSocket removes the one file every kubelet keeps at a fixed
// path, its device plugins' registration socket, once no cluster is left
// on this machine; and its directories if they are empty (a real node's
// are not).
func removeKubeletSocket() {
	records, _ := filepath.Glob(filepath.Join(stateRoot, "*.json"))
	if len(records) > 0 {
		return
	}
	_ = os.Remove("/var/lib/kubelet/device-plugins/kubelet.sock")
	_ = os.Remove("/var/lib/kubelet/device-plugins")
	_ = os.Remove("/var/lib/kubelet")
}
