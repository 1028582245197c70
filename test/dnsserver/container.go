package dnsserver

import (
	"context"
	"fmt"

	"github.com/bosh-injector/bosh-injector/test/podman"
)

// StartContainer runs CoreDNS in a container named name on network, at an
// address of its own there and port 53, where pods of the network reach it
// as a cluster's pods reach the chart's CoreDNS through its Service. dir is
// mounted at the same path, so the Corefile (written there) names files
// under dir as they are on the host; image must hold the C library CoreDNS
// was linked against (the base image does). Stop removes the container.
func StartContainer(network *podman.Network, name, image, dir string, corefile func(port int) (string, error)) (*Server, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	ip, err := network.Allocate()
	if err != nil {
		return nil, err
	}
	conf, err := writeCorefile(dir, 53, corefile)
	if err != nil {
		return nil, err
	}
	ctx := context.Background()
	_ = podman.Command(ctx, "rm", "--force", "--time", "0", name).Run()
	run := podman.Command(ctx, "run", "--detach", "--name", name, "--network="+network.Name, "--ip="+ip,
		"--volume", bin+":/usr/local/bin/coredns:ro", "--volume", dir+":"+dir+":ro",
		image, "/usr/local/bin/coredns", "-conf", conf)
	if out, err := run.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("podman run %s: %w: %s", name, err, out)
	}
	s := &Server{Addr: ip + ":53",
		stop: func() { _ = podman.Command(ctx, "rm", "--force", "--time", "0", name).Run() },
		logs: func() string {
			out, _ := podman.Command(ctx, "logs", name).CombinedOutput()
			return string(out)
		}}
	if err := s.waitReady(); err != nil {
		return nil, err
	}
	return s, nil
}
