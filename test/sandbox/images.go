package sandbox

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/bosh-injector/bosh-injector/gather/model/deployment"
	"github.com/bosh-injector/bosh-injector/gather/model/yamlvalue"
	"github.com/bosh-injector/bosh-injector/gather/releaseimage"
	"github.com/bosh-injector/bosh-injector/test/fixtures"
	"github.com/bosh-injector/bosh-injector/test/walkthrough"
)

// buildImages builds the deployment's release images as a user would, with
// `bosh-injector release-image --manifest` on the release tarballs or
// directories: on the stemcell image given (else the base image) from
// podman's storage, pushed to the cluster's
// registry, with compiled packages cached where the command caches them.
// Pods pull them from there. It returns the ops file release-image printed,
// which pins the manifest's releases to the images by digest, written into
// the work directory.
func (s *Sandbox) buildImages(ctx context.Context) (string, error) {
	// release-image reads one manifest: the user's with the ops files
	// applied, as `bosh interpolate` prints it, since they may add
	// releases.
	manifest, err := s.interpolated()
	if err != nil {
		return "", err
	}
	stemcell := s.cfg.StemcellImage
	if stemcell == "" {
		stemcell = walkthrough.BaseImage
	}
	if fixtures.Podman(ctx, "image", "exists", stemcell).Run() == nil {
		// An image in podman's storage, as `make stemcell-image` leaves
		// it; anything else is a reference release-image reads.
		stemcell = releaseimage.TransportStorage + stemcell
	}
	args := append([]string{"release-image", "--manifest", manifest, "--repository", s.w.Registry() + "/releases",
		"--stemcell-image", stemcell, "--insecure", "--push"}, s.cfg.Releases...)
	for _, si := range s.cfg.StandIns {
		args = append(args, "--stand-in", si)
	}
	cmd := exec.CommandContext(ctx, s.cfg.Binary, args...)
	cmd.Stderr = s.cfg.Out
	ops, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("bosh-injector release-image: %w", err)
	}
	path := filepath.Join(s.dir, "release-images.yml")
	return path, os.WriteFile(path, ops, 0o644)
}

// interpolated writes the manifest with the ops files applied into the work
// directory and returns its path.
func (s *Sandbox) interpolated() (string, error) {
	data, err := os.ReadFile(s.cfg.Manifest)
	if err != nil {
		return "", err
	}
	ops, err := deployment.ReadOpsFiles(context.Background(), s.cfg.OpsFiles)
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
