package walkthrough

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bosh-injector/bosh-injector/test/dnsserver"
	"github.com/bosh-injector/bosh-injector/test/podman"
)

// DNSService is the chart's CoreDNS Service; the operator sets injected
// pods' nameserver to its cluster IP, as the chart's Deployment runs it.
const DNSService = Release + "-dns"

// podDNS resolves names for the pods under podman, as a cluster's DNS and
// the chart's CoreDNS do there: the cluster DNS is CoreDNS with its
// kubernetes plugin on this machine (Services from their EndpointSlices,
// reached from pods at the network's gateway); bosh-injector's CoreDNS runs
// the chart's Corefile in a container on the pod network, serving the zone
// files the dns-zones sidecar (the built binary) keeps, and forwarding
// everything else to the cluster DNS. With no kube-proxy, the stand-in maps
// the chart's DNS Service's cluster IP to that container's address.
type podDNS struct {
	cluster, coredns *dnsserver.Server
	zones            *exec.Cmd
	exited           chan error
}

// startDNS starts the pods' DNS on network n.
func (w *Walkthrough) startDNS(ctx context.Context, n *podman.Network) (*podDNS, error) {
	// Part of the chart's step: its CoreDNS Deployment runs here as below.
	w.Say("(nor the chart's CoreDNS: CoreDNS from `make coredns` runs its Corefile in a container on the pod network, the dns-zones sidecar from %s)", w.opts.Binary)
	dir := filepath.Join(w.opts.Dir, "dns")
	zones := filepath.Join(dir, "zones")
	if err := os.MkdirAll(zones, 0o755); err != nil {
		return nil, err
	}
	d := &podDNS{}
	var err error
	if d.cluster, err = dnsserver.Start(filepath.Join(dir, "cluster-dns.log"), func(port int) (string, error) {
		// No bind: it listens on every address, the pods' gateway too.
		return fmt.Sprintf(".:%d {\n  errors\n  kubernetes cluster.local {\n    kubeconfig %s\n  }\n}\n", port, w.Kubeconfig), nil
	}); err != nil {
		return d, err
	}
	_, port, _ := net.SplitHostPort(d.cluster.Addr)
	upstream := net.JoinHostPort(n.Gateway.String(), port)

	log, err := os.Create(filepath.Join(dir, "dns-zones.log"))
	if err != nil {
		return d, err
	}
	defer log.Close()
	d.zones = exec.Command(w.opts.Binary, "dns-zones", "--dir="+zones, "--kubeconfig="+w.Kubeconfig)
	d.zones.Stdout, d.zones.Stderr = log, log
	d.zones.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := d.zones.Start(); err != nil {
		return d, err
	}
	d.exited = make(chan error, 1)
	go func() { d.exited <- d.zones.Wait() }()

	if d.coredns, err = dnsserver.StartContainer(n, n.Name+"-coredns", BaseImage, dir, func(port int) (string, error) {
		return dnsserver.ChartCorefile(port, zones, upstream)
	}); err != nil {
		return d, err
	}
	var svc corev1.Service
	if err := w.Client.Get(ctx, client.ObjectKey{Namespace: Namespace, Name: DNSService}, &svc); err != nil {
		return d, err
	}
	ip, _, _ := net.SplitHostPort(d.coredns.Addr)
	n.MapService(svc.Spec.ClusterIP, ip)
	w.Say("pod network %s %s; bosh-injector's CoreDNS at %s stands for Service %s (cluster IP %s); cluster DNS (CoreDNS, kubernetes plugin) at %s",
		n.Name, n.Subnet, d.coredns.Addr, DNSService, svc.Spec.ClusterIP, upstream)
	return d, nil
}

func (d *podDNS) stop() error {
	var errs []error
	if d.coredns != nil {
		d.coredns.Stop()
	}
	if d.zones != nil && !terminate(d.zones.Process, d.exited, 10*time.Second) {
		errs = append(errs, errors.New("dns-zones did not stop on SIGTERM"))
	}
	if d.cluster != nil {
		d.cluster.Stop()
	}
	return errors.Join(errs...)
}

// terminate stops a child process with SIGTERM, and SIGKILL after grace;
// exited receives its end. It says whether SIGTERM was enough.
func terminate(p *os.Process, exited <-chan error, grace time.Duration) bool {
	_ = p.Signal(syscall.SIGTERM)
	select {
	case <-exited:
		return true
	case <-time.After(grace):
		_ = p.Kill()
		<-exited
		return false
	}
}
