package cluster

import (
	"fmt"
	"os"
	"path/filepath"
)

// A node's configuration files: containerd's, the CNI network's, the
// kubelet's and kube-proxy's. Every path is under the node's directory but
// its sockets and the kubelet's root directory (under its run directory,
// a short path), every listener inside its namespace.

func (c *Cluster) writeContainerdConfig(n *Node) (string, error) {
	dir := filepath.Join(n.dir, "containerd")
	hosts := filepath.Join(dir, "certs.d", c.Registry)
	if err := os.MkdirAll(hosts, 0o755); err != nil {
		return "", err
	}
	if err := os.MkdirAll(n.runDir(), 0o711); err != nil {
		return "", err
	}
	// The run's registry speaks plain HTTP, as a cluster-local one does.
	if err := os.WriteFile(filepath.Join(hosts, "hosts.toml"), fmt.Appendf(nil,
		"server = %q\n\n[host.%q]\n  capabilities = [\"pull\", \"resolve\"]\n", "http://"+c.Registry, "http://"+c.Registry), 0o644); err != nil {
		return "", err
	}
	config := fmt.Sprintf(`version = 3
root = %[1]q
state = %[2]q
disabled_plugins = ["io.containerd.nri.v1.nri", "io.containerd.internal.v1.tracing"]

[grpc]
  address = %[3]q

[ttrpc]
  address = %[4]q

[plugins.'io.containerd.internal.v1.opt']
  path = %[5]q

[plugins.'io.containerd.cri.v1.runtime']
  enable_selinux = false
  disable_apparmor = true
  # No CAP_SYS_RESOURCE here: a negative oom_score_adj fails.
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true

  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = 'runc'

    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = 'io.containerd.runc.v2'

      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        BinaryName = '/usr/sbin/runc'
        Root = %[9]q
        SystemdCgroup = false

  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ['/usr/lib/cni']
    conf_dir = %[6]q

[plugins.'io.containerd.cri.v1.images']
  snapshotter = 'overlayfs'

  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = %[7]q

  [plugins.'io.containerd.cri.v1.images'.registry]
    config_path = %[8]q
`, filepath.Join(dir, "root"), filepath.Join(dir, "state"), n.containerdSocket(), n.containerdSocket()+".ttrpc",
		filepath.Join(dir, "opt"), filepath.Join(n.dir, "cni", "net.d"), c.PauseImage, filepath.Join(dir, "certs.d"), filepath.Join(dir, "runc"))
	path := filepath.Join(dir, "config.toml")
	return path, os.WriteFile(path, []byte(config), 0o644)
}

func (c *Cluster) writeCNIConfig(n *Node) error {
	dir := filepath.Join(n.dir, "cni", "net.d")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	conf := fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": "bosh-injector",
  "plugins": [
    {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": %q}]], "routes": [{"dst": "0.0.0.0/0"}], "dataDir": %q}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`, n.podSubnet(), filepath.Join(n.dir, "cni", "ipam"))
	return os.WriteFile(filepath.Join(dir, "10-bosh-injector.conflist"), []byte(conf), 0o644)
}

func (c *Cluster) writeKubeletConfig(n *Node, certFile, keyFile string) (string, error) {
	resolv := filepath.Join(n.dir, "kubelet", "resolv.conf")
	if err := os.MkdirAll(filepath.Dir(resolv), 0o755); err != nil {
		return "", err
	}
	// Pods with dnsPolicy Default, CoreDNS among them, get this: there is
	// no upstream, nothing leaves the namespace.
	if err := os.WriteFile(resolv, []byte("nameserver "+nodeIP+"\n"), 0o644); err != nil {
		return "", err
	}
	config := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %[1]s
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
containerRuntimeEndpoint: unix://%[2]s
# cgroups are v1 here, driven through cgroupfs, under a root of the
# cluster's own that the harness created in every hierarchy.
cgroupDriver: cgroupfs
cgroupRoot: %[3]s
failCgroupV1: false
failSwapOn: false
# No CAP_SYS_RESOURCE: a negative oom_score_adj fails.
oomScoreAdj: 0
# An image both imported and pulled would otherwise be refused.
imagePullCredentialsVerificationPolicy: NeverVerify
serializeImagePulls: false
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %[4]q}
authorization: {mode: Webhook}
clusterDNS: [%[5]s]
clusterDomain: cluster.local
resolvConf: %[6]q
podLogsDir: %[7]q
tlsCertFile: %[8]q
tlsPrivateKeyFile: %[9]q
# The machine's disk is shared: evict nothing for its use by others.
evictionHard: {memory.available: "100Mi", nodefs.available: "1%%", imagefs.available: "1%%", nodefs.inodesFree: "1%%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
`, n.IP, n.containerdSocket(), n.cgroup(), c.pki.CA(), DNSServiceIP, resolv,
		filepath.Join(n.dir, "kubelet", "pod-logs"), certFile, keyFile)
	path := filepath.Join(n.dir, "kubelet", "config.yaml")
	return path, os.WriteFile(path, []byte(config), 0o644)
}

func (c *Cluster) writeKubeProxyConfig(n *Node, kubeconfig string) (string, error) {
	config := fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: %q}
hostnameOverride: %s
mode: iptables
clusterCIDR: %s
bindAddress: %s
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
oomScoreAdj: 0
# nf_conntrack_max is machine-wide: left as it is.
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
`, kubeconfig, n.Name, podCIDR, n.IP)
	path := filepath.Join(n.dir, "kube-proxy.yaml")
	return path, os.WriteFile(path, []byte(config), 0o644)
}
