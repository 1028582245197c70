package sandbox

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"gopkg.in/yaml.v3"

	"github.com/bosh-injector/bosh-injector/gather/deployment"
	"github.com/bosh-injector/bosh-injector/gather/yamlvalue"
	"github.com/bosh-injector/bosh-injector/test/podman"
	"github.com/bosh-injector/bosh-injector/test/walkthrough"
)

// buildImages builds the deployment's release images as a user would, with
// `bosh-injector release-image --manifest` on the release tarballs: on the
// base image, pushed to the sandbox's registry as the stemcell image, with
// compiled packages cached where the command caches them. The images go to
// the registry; deliver makes them available to pods. It returns the ops
// file release-image printed, which pins the manifest's releases to the
// images by digest, written into the work directory.
func (s *Sandbox) buildImages(ctx context.Context) (string, error) {
	stemcell, err := s.registry.Push(ctx, walkthrough.BaseImage, "stemcell:base")
	if err != nil {
		return "", err
	}
	// release-image reads one manifest: the user's with the ops files
	// applied, as `bosh interpolate` prints it, since they may add
	// releases.
	manifest, err := s.interpolated()
	if err != nil {
		return "", err
	}
	args := append([]string{"release-image", "--manifest", manifest, "--repository", s.registry.Addr + "/releases",
		"--stemcell-image", stemcell, "--insecure", "--push"}, s.cfg.Releases...)
	cmd := exec.CommandContext(ctx, s.cfg.Binary, args...)
	cmd.Stderr = s.cfg.Out
	ops, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("bosh-injector release-image: %w", err)
	}
	path := filepath.Join(s.dir, "release-images.yml")
	if err := os.WriteFile(path, ops, 0o644); err != nil {
		return "", err
	}
	return path, s.deliver(ctx, ops)
}

// deliver makes the images an ops file of release-image pins available to
// the pods: the kubelet stand-in never pulls, so they are pulled into
// podman's storage here, where digest references find them.
func (s *Sandbox) deliver(ctx context.Context, opsFile []byte) error {
	var ops []struct{ Value string }
	if err := yaml.Unmarshal(opsFile, &ops); err != nil {
		return fmt.Errorf("release-image's ops file: %w", err)
	}
	for _, op := range ops {
		if out, err := podman.Command(ctx, "pull", "-q", "--tls-verify=false", op.Value).CombinedOutput(); err != nil {
			return fmt.Errorf("podman pull %s: %w: %s", op.Value, err, out)
		}
		s.images = append(s.images, op.Value)
		fmt.Fprintf(s.cfg.Out, "image %s\n", op.Value)
	}
	return nil
}

// interpolated writes the manifest with the ops files applied into the work
// directory and returns its path.
func (s *Sandbox) interpolated() (string, error) {
	data, err := os.ReadFile(s.cfg.Manifest)
	if err != nil {
		return "", err
	}
	ops, err := deployment.ReadOpsFiles(s.cfg.OpsFiles)
	if err != nil {
		return "", err
	}
	doc, err := deployment.Document(data, ops)
	if err != nil {
		return "", fmt.Errorf("%s: %w", s.cfg.Manifest, err)
	}
	if data, err = yamlvalue.Marshal(doc); err != nil {
		return "", err
	}
	path := filepath.Join(s.dir, "manifest-interpolated.yml")
	return path, os.WriteFile(path, data, 0o644)
}
