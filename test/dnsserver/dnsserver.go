// Package dnsserver runs CoreDNS, built from its Go module by `make coredns`,
// for tests: the chart's Corefile against zone files and an upstream of the
// test's choosing, queried over real UDP and TCP.
package dnsserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/bosh-injector/bosh-injector/test/controlplane"
)

// Binary is the CoreDNS binary: $COREDNS when set, else what `make coredns`
// builds into the test cache.
func Binary() (string, error) {
	bin := os.Getenv("COREDNS")
	if bin == "" {
		root, err := controlplane.RepoRoot()
		if err != nil {
			return "", err
		}
		out, err := exec.Command("make", "-s", "-C", root, "print-coredns").Output()
		if err != nil {
			return "", fmt.Errorf("finding CoreDNS with `make -s print-coredns`: %w", err)
		}
		bin = strings.TrimSpace(string(out))
	}
	if _, err := os.Stat(bin); err != nil {
		return "", fmt.Errorf("CoreDNS not found at %s: run `make coredns` first (it builds CoreDNS from its Go module)", bin)
	}
	return bin, nil
}

// ChartCorefile is the Corefile the chart's CoreDNS runs, read from the
// chart template with the chart's default values, listening on port, loading
// zones from dir and forwarding to upstream instead of the pod's resolv.conf.
func ChartCorefile(port int, dir, upstream string) (string, error) {
	root, err := controlplane.RepoRoot()
	if err != nil {
		return "", err
	}
	tpl, err := os.ReadFile(filepath.Join(root, "charts", "bosh-injector", "templates", "dns.yaml"))
	if err != nil {
		return "", err
	}
	m := regexp.MustCompile(`(?s)  Corefile: \|\n(.*?)\n---`).FindSubmatch(tpl)
	if m == nil {
		return "", errors.New("no Corefile in the chart's dns.yaml")
	}
	conf := strings.NewReplacer(
		"    ", "",
		".:1053 {", fmt.Sprintf(".:%d {", port),
		"{{ .Values.dns.reload }}", "1s",
		"{{ .Values.dns.cacheSeconds }}", "5",
		"{{ .Values.clusterDomain }}", "cluster.local",
		"/etc/coredns/zones", dir,
		"forward . /etc/resolv.conf", "forward . "+upstream,
		"health :8080", "",
		"ready :8181", "",
	).Replace(string(m[1]))
	if strings.Contains(conf, "{{") {
		return "", fmt.Errorf("chart Corefile has a value the test does not fill in:\n%s", conf)
	}
	return conf, nil
}

// Server is a running CoreDNS.
type Server struct {
	Addr string
	stop func()
	logs func() string
}

// Start runs CoreDNS until Stop, on a free port of 127.0.0.1, with the
// Corefile corefile makes for that port. Its log goes to logFile.
func Start(logFile string, corefile func(port int) (string, error)) (*Server, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "coredns-")
	if err != nil {
		return nil, err
	}
	conf, err := writeCorefile(dir, port, corefile)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	log, err := os.Create(logFile)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	cmd := exec.Command(bin, "-conf", conf)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = log, log
	// Dies with the test process, also when that is killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		log.Close()
		_ = os.RemoveAll(dir)
		return nil, err
	}
	s := &Server{Addr: fmt.Sprintf("127.0.0.1:%d", port),
		stop: func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			_ = log.Close()
			_ = os.RemoveAll(dir)
		},
		logs: func() string {
			out, _ := os.ReadFile(logFile)
			return string(out)
		}}
	if err := s.waitReady(); err != nil {
		return nil, err
	}
	return s, nil
}

func writeCorefile(dir string, port int, corefile func(port int) (string, error)) (string, error) {
	config, err := corefile(port)
	if err != nil {
		return "", err
	}
	conf := filepath.Join(dir, "Corefile")
	return conf, os.WriteFile(conf, []byte(config), 0o644)
}

// waitReady waits until the server answers anything over UDP; it stops
// the server when it does not.
func (s *Server) waitReady() error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		_, err := s.Resolver().LookupTXT(ctx, "ready.invalid.")
		cancel()
		var dnsErr *net.DNSError
		if err == nil || (errors.As(err, &dnsErr) && !dnsErr.IsTimeout && !strings.Contains(dnsErr.Err, "refused")) {
			return nil
		}
		if time.Now().After(deadline) {
			logs := s.logs()
			s.Stop()
			return fmt.Errorf("CoreDNS did not answer on %s: %v\n%s", s.Addr, err, logs)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Resolver queries the server, and nothing else, with Go's resolver.
func (s *Server) Resolver() *net.Resolver {
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, s.Addr)
	}}
}

// Stop ends the server.
func (s *Server) Stop() { s.stop() }

// freePort returns a port free for both UDP and TCP on 127.0.0.1.
func freePort() (int, error) {
	for range 20 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		u, err := net.ListenPacket("udp", fmt.Sprintf("127.0.0.1:%d", port))
		l.Close()
		if err == nil {
			u.Close()
			return port, nil
		}
	}
	return 0, errors.New("no port free for both UDP and TCP")
}
