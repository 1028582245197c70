// Package registry runs the CNCF distribution registry that `make testbin`
// builds from its Go module: a plain-HTTP registry on 127.0.0.1 that
// release-image pushes to and podman pulls from (with --tls-verify=false).
package registry

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/bosh-injector/bosh-injector/test/controlplane"
	"github.com/bosh-injector/bosh-injector/test/podman"
)

// Registry is a running registry.
type Registry struct {
	// Addr is host:port, the prefix of its image names.
	Addr string
	cmd  *exec.Cmd
	log  *os.File
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
	cmd := exec.Command(bin, "serve", cfgPath)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, err
	}
	r := &Registry{Addr: addr, cmd: cmd, log: log}
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

// Stop ends the registry.
func (r *Registry) Stop() {
	_ = r.cmd.Process.Kill()
	_ = r.cmd.Wait()
	_ = r.log.Close()
}

// Push pushes local podman image into the registry as name (repository and
// tag) and returns its reference there: the base image becomes the stemcell
// image release-image builds on.
func (r *Registry) Push(ctx context.Context, image, name string) (string, error) {
	ref := r.Addr + "/" + name
	if out, err := podman.Command(ctx, "push", "-q", "--tls-verify=false", image, ref).CombinedOutput(); err != nil {
		return "", fmt.Errorf("pushing %s as %s: %w: %s", image, ref, err, out)
	}
	return ref, nil
}
