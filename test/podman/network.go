package podman

import (
	"fmt"
	"net/netip"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
)

// Network is the stand-in's pod network: a podman bridge network (CNI here)
// of its own, on which every pod gets an address of its own, as a cluster's
// CNI plugin gives one. Pods reach each other and the host (at Gateway);
// the Network hands out the addresses itself, because a pod's address must
// be known before it plays (status.podIP env, the reported pod status).
//
// There is no kube-proxy: a Service's cluster IP reaches nothing. Pods
// resolve the headless Services bosh-injector keeps to pod addresses through
// DNS; the only cluster IP a pod is given directly is its nameserver's
// (the webhook's dnsConfig), which MapService turns into the address that
// really serves it.
type Network struct {
	Name    string
	Subnet  netip.Prefix
	Gateway netip.Addr

	mu       sync.Mutex
	last     netip.Addr
	services map[string]string
}

// CreateNetwork creates a podman bridge network named name, without
// podman's own DNS (pods resolve names with the cluster's), on a subnet
// podman picks among the free ones.
func CreateNetwork(name string) (*Network, error) {
	// A network of this name is left from a run that was killed.
	if _, err := podman("network", "rm", "--force", name); err != nil && !strings.Contains(err.Error(), "unable to find network") {
		return nil, err
	}
	if _, err := podman("network", "create", "--disable-dns", name); err != nil {
		return nil, err
	}
	out, err := podman("network", "inspect", "--format", "{{range .Subnets}}{{.Subnet}} {{.Gateway}}{{end}}", name)
	if err != nil {
		return nil, err
	}
	fields := strings.Fields(out)
	if len(fields) != 2 {
		return nil, fmt.Errorf("network %s: subnet and gateway %q", name, out)
	}
	n := &Network{Name: name, services: map[string]string{}}
	if n.Subnet, err = netip.ParsePrefix(fields[0]); err != nil {
		return nil, err
	}
	if n.Gateway, err = netip.ParseAddr(fields[1]); err != nil {
		return nil, err
	}
	n.last = n.Gateway
	return n, nil
}

// Allocate returns an unused address of the network.
func (n *Network) Allocate() (string, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	next := n.last.Next()
	// The last address of the subnet is its broadcast address.
	if !n.Subnet.Contains(next) || !n.Subnet.Contains(next.Next()) {
		return "", fmt.Errorf("network %s: no address left in %s", n.Name, n.Subnet)
	}
	n.last = next
	return next.String(), nil
}

// MapService makes pods given clusterIP as nameserver use addr instead:
// the part of kube-proxy pods of the stand-in need.
func (n *Network) MapService(clusterIP, addr string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.services[clusterIP] = addr
}

// Remove removes the network; its pods must be gone.
func (n *Network) Remove() error {
	_, err := podman("network", "rm", "--force", n.Name)
	return err
}

// join gives a pod that does not share the host's network (hostNetwork, a
// kubeconfig or a token, see Env) an address on n. A nil n leaves pods
// with loopback only, as before networks existed here.
func (n *Network) join(env *Env, pod *corev1.Pod) error {
	if n == nil || pod.Spec.HostNetwork || env.Kubeconfig != "" || len(env.Tokens) > 0 {
		return nil
	}
	ip, err := n.Allocate()
	if err != nil {
		return err
	}
	env.PodIP, env.Network = ip, n
	return nil
}

// attach records the pod's network in run and points the pod's nameservers
// at the addresses serving them.
func (n *Network) attach(p *corev1.Pod, run *Run) {
	if n == nil || p.Spec.HostNetwork {
		return
	}
	run.network = n.Name
	if p.Spec.DNSConfig == nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	for i, s := range p.Spec.DNSConfig.Nameservers {
		if addr, ok := n.services[s]; ok {
			p.Spec.DNSConfig.Nameservers[i] = addr
		}
	}
}

// networkArgs are kube play's network flags for the run: its own address on
// the network, the host's network, or loopback only.
func (r *Run) networkArgs() []string {
	switch {
	case r.hostNet:
		return nil
	case r.network != "":
		return []string{"--network=" + r.network, "--ip=" + r.podIP}
	}
	return []string{"--network=none"}
}
