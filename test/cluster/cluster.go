// Package cluster runs a real Kubernetes cluster of one node or a few on
// this machine, for the end-to-end tests, the demo and the sandbox: etcd,
// kube-apiserver, kube-controller-manager (every controller),
// kube-scheduler, containerd v2, the kubelet and kube-proxy, all built from
// their Go modules by `make testbin`, with Debian's runc and CNI plugins; a
// CSI driver whose volumes grow (csi.go); an image registry; CoreDNS
// as a pod behind the cluster DNS Service, as a cluster's kube-dns.
//
// Everything runs inside a network namespace of its own (each further
// node in one more, on the first one's bridge, as kind runs a node per
// container), reached from this machine through a veth pair (Cluster.Kubeconfig works for kubectl and
// helm here; Cluster.Registry takes pushes from here). Every process is in
// a cgroup of the cluster's; Stop kills them all and removes every mount,
// cgroup and the namespace, and puts back the sysctls the kubelet rewrote.
// A cluster whose process died is torn down by the next Start, or by Down.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bosh-injector/bosh-injector/test/controlplane"
)

// Options configure a cluster.
type Options struct {
	// Dir holds the cluster's files (certificates, data, logs); a new
	// temporary directory when empty. It is removed at Stop.
	Dir string
	// Keep leaves the cluster running after this process ends, until Down
	// (`make demo-down`).
	Keep bool
	// Log receives a line per component as it comes up; nil for none.
	Log io.Writer
	// CertManager installs cert-manager's CRDs and runs its controller
	// (self-signed and CA issuers) and cainjector as pods.
	CertManager bool
	// Nodes is how many nodes to start (at most 4; default one, or one
	// per zone), in parallel; Zones, when given, each one's
	// topology.kubernetes.io/zone, in order. The cluster's own pods
	// (CoreDNS, cert-manager) run on the first node.
	Nodes int
	Zones []string
}

// Cluster is a running cluster.
type Cluster struct {
	// Config is an admin (system:masters) REST config, Client and
	// Clientset clients from it.
	Config    *rest.Config
	Client    client.Client
	Clientset kubernetes.Interface
	// Kubeconfig is the file of Config, for kubectl and helm.
	Kubeconfig string
	// Registry is host:port of the cluster's image registry: this machine
	// pushes to it, the node pulls from it (plain HTTP).
	Registry string
	// NodeName is the first node's name; Nodes are all of them.
	NodeName string
	Nodes    []*Node
	// PauseImage and CoreDNSImage are images the cluster built and pushed
	// to its registry: the pod sandbox, and CoreDNS with the plugins the
	// chart's Corefile uses.
	PauseImage, CoreDNSImage string
	// Dir holds the cluster's files, LogDir one log per process;
	// NodesDir, a short path whatever Dir's, the nodes' sockets and
	// kubelet root directories (a unix socket's path has at most 107
	// bytes).
	Dir, LogDir, NodesDir string
	// BinDir holds the binaries `make testbin` built.
	BinDir string

	opts     Options
	rec      *record
	lock     *os.File
	pki      *pki
	stopOnce sync.Once
	stopErr  error
}

// proc is a process the cluster started in its namespace.
type proc struct {
	name   string
	cmd    *exec.Cmd
	exited chan error
}

// Start starts a cluster and returns once its node is Ready, CoreDNS
// answers and the default namespace's ServiceAccount exists. On error
// everything already started is torn down again.
func Start(ctx context.Context, opts Options) (c *Cluster, err error) {
	zones, err := nodeZones(opts)
	if err != nil {
		return nil, err
	}
	binDir, err := controlplane.TestbinDir()
	if err != nil {
		return nil, err
	}
	if err := preflight(binDir); err != nil {
		return nil, err
	}
	rec, lock, err := claimSlot()
	if err != nil {
		return nil, err
	}
	if err := rec.removeNodesDir(); err != nil {
		lock.Close()
		return nil, err
	}
	dir := opts.Dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "bosh-injector-cluster-"); err != nil {
			lock.Close()
			return nil, err
		}
	}
	rec.Dir, rec.Keep, rec.Nodes = dir, opts.Keep, len(zones)
	c = &Cluster{opts: opts, rec: rec, lock: lock, Dir: dir, LogDir: filepath.Join(dir, "logs"), NodesDir: rec.nodesDir(),
		BinDir: binDir, Registry: rec.innerIP() + ":5000"}
	for i, z := range zones {
		c.Nodes = append(c.Nodes, newNode(rec, dir, i, z))
	}
	c.NodeName = c.Nodes[0].Name
	defer func() {
		if err != nil {
			err = fmt.Errorf("%w%s", err, c.logTails(30))
			c.opts.Keep = false
			_ = c.Stop()
			c = nil
		}
	}()
	if err := rec.save(); err != nil {
		return c, err
	}
	if err := os.MkdirAll(c.LogDir, 0o755); err != nil {
		return c, err
	}
	if err := rec.createNetwork(); err != nil {
		return c, err
	}
	for _, n := range c.Nodes[1:] {
		if err := rec.createNodeNetwork(n, c.Nodes); err != nil {
			return c, err
		}
	}
	if err := rec.createCgroups(c.Nodes); err != nil {
		return c, err
	}
	began := time.Now()
	// The nodes' runtime (registry, images, containerd) needs no
	// apiserver: it comes up while the control plane does.
	nodeRuntime := background(func() error { return c.startRuntime(ctx) })
	err = c.startControlPlane(ctx)
	if err == nil {
		c.say("control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler) at %s in %s; files in %s", c.Config.Host, since(began), c.Dir)
	}
	if err := errors.Join(err, nodeRuntime()); err != nil {
		return c, err
	}
	if err := c.startCSI(ctx); err != nil {
		return c, err
	}
	// The addons (CoreDNS) and cert-manager's CRDs, images and Deployments
	// need only the apiserver and the registry: they are made while the
	// node starts, their pods scheduled once it is Ready.
	bgCtx, cancel := context.WithCancel(ctx)
	addons := background(func() error { return c.startAddons(bgCtx) })
	certManager := background(func() error {
		if !opts.CertManager {
			return nil
		}
		return c.startCertManager(bgCtx)
	})
	defer func() {
		cancel()
		_, _ = addons(), certManager()
	}()
	if err := c.startNodes(ctx, began); err != nil {
		return c, err
	}
	if err := addons(); err != nil {
		return c, err
	}
	c.say("cluster DNS (CoreDNS at %s) and the default StorageClass in %s", DNSServiceIP, since(began))
	if err := certManager(); err != nil {
		return c, err
	}
	if opts.CertManager {
		c.say("cert-manager: its controller and cainjector as pods in namespace cert-manager, in %s", since(began))
	}
	return c, nil
}

// background runs f in a goroutine of its own; the function returned waits
// for it and returns its error, the same at every call.
func background(f func() error) func() error {
	done := make(chan struct{})
	var err error
	go func() {
		err = f()
		close(done)
	}()
	return func() error {
		<-done
		return err
	}
}

func since(t time.Time) time.Duration { return time.Since(t).Round(100 * time.Millisecond) }

func (c *Cluster) say(format string, args ...any) {
	if c.opts.Log != nil {
		fmt.Fprintf(c.opts.Log, format+"\n", args...)
	}
}

// preflight names what the node lacks and how to get it.
func preflight(binDir string) error {
	if os.Geteuid() != 0 {
		return errors.New("the test cluster's node runs as root (network namespace, cgroups, mounts): run as root")
	}
	var missing []string
	for _, tool := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy",
		"containerd", "containerd-shim-runc-v2", "kubectl", "registry", csiBinary} {
		if _, err := os.Stat(filepath.Join(binDir, tool)); err != nil {
			missing = append(missing, tool)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("the test cluster needs %s in %s: run `make testbin` (it builds them from their Go modules)", strings.Join(missing, ", "), binDir)
	}
	packages := map[string]string{
		"/usr/sbin/runc": "runc", "/usr/lib/cni/bridge": "containernetworking-plugins", "/usr/lib/cni/host-local": "containernetworking-plugins",
		"/usr/lib/cni/loopback": "containernetworking-plugins", "/usr/lib/cni/portmap": "containernetworking-plugins",
		"/usr/sbin/iptables": "iptables", "/usr/sbin/conntrack": "conntrack", "/usr/sbin/nft": "nftables",
		"/usr/sbin/ip": "iproute2", "/usr/bin/nsenter": "util-linux", "/usr/bin/setpriv": "util-linux",
		"/usr/sbin/losetup": "mount", "/usr/sbin/mkfs.xfs": "xfsprogs", "/usr/sbin/xfs_growfs": "xfsprogs",
	}
	for path, pkg := range packages {
		if _, err := os.Stat(path); err != nil {
			missing = append(missing, fmt.Sprintf("%s (Debian package %s)", path, pkg))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("the test cluster's node needs %s: run `make deps`", strings.Join(missing, ", "))
	}
	if _, err := cgroupHierarchies(); err != nil {
		return fmt.Errorf("the kubelet needs cgroups: %w", err)
	}
	return nil
}

// start runs a binary of BinDir inside the first node's namespace, with
// its output in LogDir and its process in the cluster's cgroup. Unless the
// cluster is kept it dies with this process.
func (c *Cluster) start(name string, args ...string) (*proc, error) {
	return c.startOn(c.Nodes[0], name, nil, filepath.Join(c.BinDir, name), args...)
}

// startOn runs bin as start does, in node n's namespace and cgroup.
func (c *Cluster) startOn(n *Node, name string, env []string, bin string, args ...string) (*proc, error) {
	name = n.logName(name)
	log, err := os.Create(filepath.Join(c.LogDir, name+".log"))
	if err != nil {
		return nil, err
	}
	defer log.Close()
	wrapper := []string{"--net=" + n.netnsPath(), "--"}
	if !c.opts.Keep {
		wrapper = append(wrapper, "setpriv", "--pdeathsig", "KILL", "--")
	}
	cmd := exec.Command("nsenter", append(append(wrapper, bin), args...)...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, exited: make(chan error, 1)}
	go func() { p.exited <- cmd.Wait() }()
	if err := c.rec.joinCgroup(cmd.Process.Pid, n.cgroup()); err != nil {
		return p, err
	}
	return p, nil
}

// until polls ready every 100 ms until it is true, p exits or timeout
// passes.
func until(ctx context.Context, p *proc, what string, timeout time.Duration, ready func() bool) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		if p != nil {
			select {
			case err := <-p.exited:
				p.exited <- err
				return fmt.Errorf("%s exited while waiting for %s: %v", p.name, what, err)
			default:
			}
		}
		if ready() {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: not there after %s", what, timeout)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (c *Cluster) startControlPlane(ctx context.Context) error {
	var err error
	if c.pki, err = newPKI(filepath.Join(c.Dir, "pki")); err != nil {
		return err
	}
	p := c.pki
	apiCert, apiKey, err := p.issue("kube-apiserver", "kube-apiserver", nil,
		nodeIP, c.rec.innerIP(), APIServiceIP, "127.0.0.1", "localhost",
		"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local")
	if err != nil {
		return err
	}
	kubeletClientCert, kubeletClientKey, err := p.issue("apiserver-kubelet-client", "kube-apiserver-kubelet-client", []string{"system:masters"})
	if err != nil {
		return err
	}
	saPub, saKey, err := p.serviceAccountKey()
	if err != nil {
		return err
	}
	inside := "https://" + nodeIP + ":6443"
	kubeconfigs := map[string]string{}
	for _, u := range []struct{ name, cn, org, server string }{
		{"admin", "bosh-injector-admin", "system:masters", "https://" + c.rec.innerIP() + ":6443"},
		{"kube-controller-manager", "system:kube-controller-manager", "", inside},
		{"kube-scheduler", "system:kube-scheduler", "", inside},
		{"kube-proxy", "system:kube-proxy", "", inside},
	} {
		var orgs []string
		if u.org != "" {
			orgs = []string{u.org}
		}
		cert, key, err := p.issue(u.name+"-client", u.cn, orgs)
		if err != nil {
			return err
		}
		kubeconfigs[u.name] = filepath.Join(c.Dir, u.name+".kubeconfig")
		if err := kubeconfig(kubeconfigs[u.name], u.server, p.CA(), cert, key); err != nil {
			return err
		}
	}
	c.Kubeconfig = kubeconfigs["admin"]

	if _, err := c.start("etcd", "--data-dir="+filepath.Join(c.Dir, "etcd"), "--name=bosh-injector",
		"--listen-client-urls=http://127.0.0.1:2379", "--advertise-client-urls=http://127.0.0.1:2379",
		"--listen-peer-urls=http://127.0.0.1:2380", "--initial-advertise-peer-urls=http://127.0.0.1:2380",
		"--initial-cluster=bosh-injector=http://127.0.0.1:2380", "--unsafe-no-fsync", "--log-level=warn"); err != nil {
		return err
	}
	api, err := c.start("kube-apiserver",
		"--etcd-servers=http://127.0.0.1:2379", "--bind-address=0.0.0.0", "--secure-port=6443",
		"--advertise-address="+nodeIP, "--service-cluster-ip-range="+serviceNet,
		"--tls-cert-file="+apiCert, "--tls-private-key-file="+apiKey, "--client-ca-file="+p.CA(),
		"--authorization-mode=Node,RBAC", "--enable-admission-plugins=NodeRestriction",
		"--service-account-key-file="+saPub, "--service-account-signing-key-file="+saKey,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--kubelet-client-certificate="+kubeletClientCert, "--kubelet-client-key="+kubeletClientKey,
		"--kubelet-certificate-authority="+p.CA(), "--kubelet-preferred-address-types=InternalIP",
		"--allow-privileged=true", "--profiling=false", "--v=1")
	if err != nil {
		return err
	}
	if c.Config, err = clientcmd.BuildConfigFromFlags("", c.Kubeconfig); err != nil {
		return err
	}
	c.Config.QPS, c.Config.Burst = 200, 400
	if c.Clientset, err = kubernetes.NewForConfig(c.Config); err != nil {
		return err
	}
	if err := until(ctx, api, "kube-apiserver's /readyz", time.Minute, func() bool {
		return c.Clientset.Discovery().RESTClient().Get().AbsPath("/readyz").Do(ctx).Error() == nil
	}); err != nil {
		return err
	}
	if c.Client, err = client.New(c.Config, client.Options{}); err != nil {
		return err
	}
	kcm := []string{"--kubeconfig=" + kubeconfigs["kube-controller-manager"]}
	if len(c.Nodes) > 1 {
		// A lost node is noticed in 20 s rather than a real cluster's 50:
		// its kubelet renews its lease every 10.
		kcm = append(kcm, "--node-monitor-grace-period=20s")
	}
	if _, err := c.start("kube-controller-manager", append(kcm,
		"--authentication-kubeconfig="+kubeconfigs["kube-controller-manager"],
		"--authorization-kubeconfig="+kubeconfigs["kube-controller-manager"],
		"--leader-elect=false", "--bind-address=127.0.0.1", "--secure-port=10257",
		"--cert-dir="+filepath.Join(c.Dir, "kube-controller-manager"),
		"--controllers=*", "--use-service-account-credentials=true",
		"--service-account-private-key-file="+saKey, "--root-ca-file="+p.CA(),
		"--cluster-signing-cert-file="+p.CA(), "--cluster-signing-key-file="+filepath.Join(p.dir, "ca.key"),
		"--kube-api-qps=500", "--kube-api-burst=1000", "--concurrent-statefulset-syncs=10")...); err != nil {
		return err
	}
	_, err = c.start("kube-scheduler",
		"--kubeconfig="+kubeconfigs["kube-scheduler"],
		"--authentication-kubeconfig="+kubeconfigs["kube-scheduler"],
		"--authorization-kubeconfig="+kubeconfigs["kube-scheduler"],
		"--leader-elect=false", "--bind-address=127.0.0.1", "--secure-port=10259")
	return err
}

// startRuntime starts what the kubelets need besides the apiserver: the
// registry with the pause and CoreDNS images, and on every node, at once,
// its CNI configuration and containerd.
func (c *Cluster) startRuntime(ctx context.Context) error {
	if err := c.startRegistry(ctx); err != nil {
		return err
	}
	if err := c.buildImages(ctx); err != nil {
		return err
	}
	return c.eachNode(func(n *Node) error {
		if err := c.writeCNIConfig(n); err != nil {
			return err
		}
		config, err := c.writeContainerdConfig(n)
		if err != nil {
			return err
		}
		// Its shims make runc's console sockets in XDG_RUNTIME_DIR, else
		// in TMPDIR.
		containerd, err := c.startOn(n, "containerd", []string{"PATH=" + c.BinDir + ":" + os.Getenv("PATH"), "XDG_RUNTIME_DIR=" + n.runDir()},
			filepath.Join(c.BinDir, "containerd"), "--config="+config)
		if err != nil {
			return err
		}
		return until(ctx, containerd, n.Name+"'s containerd socket", 30*time.Second, func() bool {
			_, err := os.Stat(n.containerdSocket())
			return err == nil
		})
	})
}

// eachNode runs f for every node at once and returns their errors.
func (c *Cluster) eachNode(f func(n *Node) error) error {
	var waits []func() error
	for _, n := range c.Nodes {
		waits = append(waits, background(func() error { return f(n) }))
	}
	var errs []error
	for _, w := range waits {
		errs = append(errs, w())
	}
	return errors.Join(errs...)
}

// startNodes starts every node's kubelet at once, once the control plane
// and the runtime are up, then each one's kube-proxy. The kubelets rewrite
// machine-wide sysctls as they start: saved before the first, put back
// once every node is Ready, with no other cluster's kubelet starting in
// between.
func (c *Cluster) startNodes(ctx context.Context, began time.Time) error {
	unlock, err := lockSysctls()
	if err != nil {
		return err
	}
	defer unlock()
	if c.rec.Sysctls, err = saveSysctls(); err != nil {
		return err
	}
	if err := c.rec.save(); err != nil {
		return err
	}
	if err := raiseInotify(); err != nil {
		return err
	}
	err = c.eachNode(func(n *Node) error {
		if err := c.startKubelet(ctx, n); err != nil {
			return err
		}
		c.say("node %s%s Ready (kubelet, containerd) in %s%s", n.Name, zoneSuffix(n.Zone), since(began), c.nodeRSS(n))
		return nil
	})
	if werr := writeSysctls(c.rec.Sysctls); werr != nil {
		return errors.Join(err, werr)
	}
	if err != nil {
		return err
	}
	return c.eachNode(func(n *Node) error {
		proxyConfig, err := c.writeKubeProxyConfig(n, filepath.Join(c.Dir, "kube-proxy.kubeconfig"))
		if err != nil {
			return err
		}
		// kube-proxy exits when its Node is not registered yet: started now.
		_, err = c.startOn(n, "kube-proxy", nil, filepath.Join(c.BinDir, "kube-proxy"), "--config="+proxyConfig, "--v=1")
		return err
	})
}

func zoneSuffix(zone string) string {
	if zone == "" {
		return ""
	}
	return " (zone " + zone + ")"
}

// nodeRSS says what a node other than the first (whose daemons share the
// control plane's cgroup) holds resident.
func (c *Cluster) nodeRSS(n *Node) string {
	hierarchies, err := cgroupHierarchies()
	if err != nil || n.index == 0 {
		return ""
	}
	return fmt.Sprintf(", %d MB resident", rss(filepath.Join(hierarchies[0], n.cgroup()))>>20)
}

// startKubelet starts node n's kubelet, with its own credentials, and
// waits until its Node is Ready.
func (c *Cluster) startKubelet(ctx context.Context, n *Node) error {
	p := c.pki
	cert, key, err := p.issue(n.Name+"-serving", "system:node:"+n.Name, []string{"system:nodes"}, n.IP, n.Name)
	if err != nil {
		return err
	}
	clientCert, clientKey, err := p.issue(n.Name+"-client", "system:node:"+n.Name, []string{"system:nodes"})
	if err != nil {
		return err
	}
	kubeletKubeconfig := filepath.Join(n.dir, "kubelet.kubeconfig")
	if err := os.MkdirAll(n.dir, 0o755); err != nil {
		return err
	}
	if err := kubeconfig(kubeletKubeconfig, "https://"+nodeIP+":6443", p.CA(), clientCert, clientKey); err != nil {
		return err
	}
	kubeletConfig, err := c.writeKubeletConfig(n, cert, key)
	if err != nil {
		return err
	}
	args := []string{"--config=" + kubeletConfig, "--kubeconfig=" + kubeletKubeconfig,
		"--root-dir=" + n.kubeletDir(), "--cert-dir=" + filepath.Join(n.dir, "kubelet", "pki"),
		"--hostname-override=" + n.Name, "--node-ip=" + n.IP, "--v=1"}
	if n.Zone != "" {
		args = append(args, "--node-labels="+corev1.LabelTopologyZone+"="+n.Zone)
	}
	kubelet, err := c.startOn(n, "kubelet", nil, filepath.Join(c.BinDir, "kubelet"), args...)
	if err != nil {
		return err
	}
	return until(ctx, kubelet, "node "+n.Name+" to be Ready", time.Minute, func() bool { return c.nodeReady(ctx, n.Name) })
}

func (c *Cluster) startRegistry(ctx context.Context) error {
	config := fmt.Sprintf(`version: 0.1
log: {level: error, accesslog: {disabled: true}}
storage: {filesystem: {rootdirectory: %s}, delete: {enabled: true}}
http: {addr: "0.0.0.0:5000"}
`, filepath.Join(c.Dir, "registry"))
	path := filepath.Join(c.Dir, "registry.yml")
	if err := os.WriteFile(path, []byte(config), 0o644); err != nil {
		return err
	}
	p, err := c.start("registry", "serve", path)
	if err != nil {
		return err
	}
	return until(ctx, p, "the registry at "+c.Registry, 20*time.Second, func() bool {
		resp, err := http.Get("http://" + c.Registry + "/v2/")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil
	})
}

// Ctr runs containerd's ctr against a node's containerd, in the
// Kubernetes namespace, and returns its standard output: the first node's
// answer that is not an error (a container's ID names it on one node only),
// else the first node's error.
func (c *Cluster) Ctr(ctx context.Context, args ...string) ([]byte, error) {
	var first error
	for _, n := range c.Nodes {
		cmd := exec.CommandContext(ctx, filepath.Join(c.BinDir, "ctr"),
			append([]string{"--address", n.containerdSocket(), "--namespace", "k8s.io"}, args...)...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err == nil {
			return out, nil
		}
		if first == nil {
			first = fmt.Errorf("ctr %s: %w: %s", strings.Join(args, " "), err, stderr.String())
		}
	}
	return nil, first
}

// Stop tears the cluster down: PersistentVolumes' host directories, every
// process, mount and cgroup, the namespace, the files; and puts the
// sysctls back. A kept cluster (Options.Keep) is left running instead,
// for Down. Safe to call more than once.
func (c *Cluster) Stop() error {
	c.stopOnce.Do(func() {
		if c.opts.Keep {
			c.lock.Close()
			return
		}
		// Nothing of the cluster outlives it: every process is killed at
		// once, as Down does (a graceful apiserver and etcd took seconds).
		c.stopErr = c.rec.teardown()
		c.lock.Close()
	})
	return c.stopErr
}

// Logs writes the last lines of each process's log to w.
func (c *Cluster) Logs(w io.Writer, lines int) { fmt.Fprint(w, c.logTails(lines)) }

func (c *Cluster) logTails(lines int) string { return controlplane.LogTails(c.LogDir, lines) }
