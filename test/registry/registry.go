// Package registry runs the CNCF distribution registry that `make testbin`
// builds from its Go module: a plain-HTTP registry on 127.0.0.1 that
// release-image pushes to and podman pulls from, told it is insecure by the
// registries.conf the registry writes, as a node's container runtime is.
package registry

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/bosh-injector/bosh-injector/test/controlplane"
)

// Registry is a running registry.
type Registry struct {
	// Addr is host:port, the prefix of its image names.
	Addr string
	// RegistriesConf is a registries.conf (containers-registries.conf(5),
	// what CRI-O and podman read) marking the registry insecure: plain HTTP,
	// as a node is configured for a cluster-local registry.
	RegistriesConf string
	cmd            *exec.Cmd
	log            *os.File
}

// Binary is the registry executable in the test bin.
func Binary() (string, error) {
	dir, err := controlplane.TestbinDir()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "registry")
	if _, err := os.Stat(bin); err != nil {
		return "", fmt.Errorf("no registry in the test bin (%w): run `make testbin`", err)
	}
	return bin, nil
}

// Start runs a registry storing its blobs under dir, on a free port.
func Start(dir string) (*Registry, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := l.Addr().String()
	l.Close()
	config := fmt.Sprintf(`version: 0.1
log: {level: error, accesslog: {disabled: true}}
storage: {filesystem: {rootdirectory: %s}, delete: {enabled: true}}
http: {addr: %s}
`, filepath.Join(dir, "data"), addr)
	cfgPath := filepath.Join(dir, "config.yml")
	if err := os.WriteFile(cfgPath, []byte(config), 0o644); err != nil {
		return nil, err
	}
	log, err := os.Create(filepath.Join(dir, "registry.log"))
	if err != nil {
		return nil, err
	}
	registries := filepath.Join(dir, "registries.conf")
	if err := os.WriteFile(registries, fmt.Appendf(nil, "[[registry]]\nlocation = %q\ninsecure = true\n", addr), 0o644); err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "serve", cfgPath)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, err
	}
	r := &Registry{Addr: addr, RegistriesConf: registries, cmd: cmd, log: log}
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		resp, err := http.Get("http://" + addr + "/v2/")
		if err == nil {
			resp.Body.Close()
			return r, nil
		}
	}
	r.Stop()
	out, _ := os.ReadFile(log.Name())
	return nil, fmt.Errorf("registry on %s did not answer: %s", addr, out)
}

// Stop ends the registry and untags the images podman pulled from it: a
// later registry on the same port would hold other images under their
// names, which pods pulling only when missing would not fetch.
func (r *Registry) Stop() {
	_ = r.cmd.Process.Kill()
	_ = r.cmd.Wait()
	_ = r.log.Close()
	// Pods pull by tag or, pinned by an ops file of release-image, by
	// digest (then untagged): either way the image goes with the registry.
	out, _ := exec.Command("podman", "images", "--noheading", "--format", "{{.Repository}} {{.Tag}} {{.Digest}}").Output()
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 || !strings.HasPrefix(f[0], r.Addr+"/") {
			continue
		}
		ref := f[0] + ":" + f[1]
		if f[1] == "<none>" {
			ref = f[0] + "@" + f[2]
		}
		_ = exec.Command("podman", "rmi", "--ignore", ref).Run()
	}
}
