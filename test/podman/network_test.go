package podman_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bosh-injector/bosh-injector/test/podman"
)

// Pods on the stand-in's network: each has its own address, reaches the
// other pod and the host over TCP, and resolves names with the server its
// dnsConfig names through the cluster IP mapping.
func TestNetwork(t *testing.T) {
	if err := podman.Check(base); err != nil {
		t.Fatal(err)
	}
	n, err := podman.CreateNetwork(fmt.Sprintf("podman-test-%d", os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	// The host side: a listener the pods reach at the gateway.
	host, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	go func() {
		for {
			c, err := host.Accept()
			if err != nil {
				return
			}
			fmt.Fprintln(c, "hello from the host")
			c.Close()
		}
	}()
	hostPort := host.Addr().(*net.TCPAddr).Port

	ctx := context.Background()
	dir := t.TempDir()
	var runs []*podman.Run
	t.Cleanup(func() {
		for _, r := range runs {
			if err := r.Remove(); err != nil {
				t.Error(err)
			}
		}
		if err := n.Remove(); err != nil {
			t.Error(err)
		}
	})
	play := func(name string, dns *corev1.PodDNSConfig, script string, args ...string) *podman.Run {
		t.Helper()
		ip, err := n.Allocate()
		if err != nil {
			t.Fatal(err)
		}
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns1"}, Spec: corev1.PodSpec{
			DNSPolicy: corev1.DNSNone, DNSConfig: dns,
			Containers: []corev1.Container{{Name: "main", Image: base, Command: append([]string{"perl", "-MIO::Socket::INET", "-e", script}, args...),
				Env: []corev1.EnvVar{{Name: "IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}}}}},
		}}
		run, err := podman.Adapt(pod, podman.Env{PodIP: ip, Network: n, Dir: dir, Prefix: "podman-test-"})
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, run)
		if err := run.Play(ctx); err != nil {
			t.Fatal(err)
		}
		return run
	}

	server := play("server", nil, `$|=1; $s=IO::Socket::INET->new(LocalPort=>7000, Listen=>5, ReuseAddr=>1) or die $!; print "listening\n";
		while ($c=$s->accept) { print $c "hello from $ENV{IP}\n"; close $c }`)
	if _, err := server.WaitForLog(ctx, "main", "listening", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	serverIP := server.Pod.Spec.Containers[0].Env[0].Value

	// The webhook gives pods the DNS Service's cluster IP; the stand-in
	// maps it to where the server really is.
	n.MapService("10.0.0.10", "10.0.0.99")
	client := play("client", &corev1.PodDNSConfig{Nameservers: []string{"10.0.0.10"}, Searches: []string{"a.internal"}},
		`for $to (@ARGV) { ($h, $p) = split /:/, $to; $c = IO::Socket::INET->new(PeerAddr=>$h, PeerPort=>$p, Timeout=>5) or die "$to: $!\n"; print scalar <$c> }
		open F, "/etc/resolv.conf"; print <F>`,
		serverIP+":7000", fmt.Sprintf("%s:%d", n.Gateway, hostPort))
	results, err := client.Wait(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	got := results[0]
	if !got.Ran || got.ExitCode != 0 {
		t.Fatalf("client: %+v", got)
	}
	for _, want := range []string{"hello from " + serverIP + "\n", "hello from the host\n", "nameserver 10.0.0.99\n", "search a.internal\n"} {
		if !strings.Contains(got.Logs, want) {
			t.Errorf("client's output lacks %q:\n%s", want, got.Logs)
		}
	}
	if !n.Subnet.Contains(mustAddr(t, serverIP)) {
		t.Errorf("server address %s not in %s", serverIP, n.Subnet)
	}

	// The host reaches the pods too (the tests query pods' servers).
	c, err := net.DialTimeout("tcp", serverIP+":7000", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || line != "hello from "+serverIP+"\n" {
		t.Fatalf("from the host: %q %v", line, err)
	}
}

func mustAddr(t *testing.T, s string) netip.Addr {
	t.Helper()
	a, err := netip.ParseAddr(s)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
