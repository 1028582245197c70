// Package releaseimage builds a BOSH release's container image with podman,
// in the layout bosh-injector expects of release images (as fissile-built
// images have it): every job under /var/vcap/jobs-src/<job>/ with its spec as
// job.MF, its monit file and templates/, and every package under
// /var/vcap/packages/<package>/.
package releaseimage

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/bosh-injector/bosh-injector/test/podman"
)

// Release is a release source tree to build into Image.
type Release struct {
	// Dir holds jobs/<job>/{spec,monit,templates/}.
	Dir string
	// Packages maps a package name to files to install under
	// /var/vcap/packages/<package>/, by their path there (e.g. "bin/web").
	Packages map[string]map[string]string
	// Base is the image to build on; it needs a POSIX shell, with which the
	// copy init containers copy the jobs.
	Base  string
	Image string
}

// Build builds the release image. Work files go to a temporary directory.
func Build(ctx context.Context, r Release) error {
	work, err := os.MkdirTemp("", "release-image-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)

	if err := LayoutJobs(r.Dir, filepath.Join(work, "jobs-src")); err != nil {
		return err
	}
	for pkg, files := range r.Packages {
		for rel, src := range files {
			if err := copyFile(src, filepath.Join(work, "packages", pkg, rel), 0o755); err != nil {
				return fmt.Errorf("package %s: %w", pkg, err)
			}
		}
	}
	if err := os.MkdirAll(filepath.Join(work, "packages"), 0o755); err != nil {
		return err
	}
	containerfile := fmt.Sprintf("FROM %s\nCOPY jobs-src /var/vcap/jobs-src\nCOPY packages /var/vcap/packages\n", r.Base)
	if err := os.WriteFile(filepath.Join(work, "Containerfile"), []byte(containerfile), 0o644); err != nil {
		return err
	}
	var out bytes.Buffer
	cmd := podman.Command(ctx, "build", "--network=none", "-q", "-t", r.Image, work)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("podman build %s: %w: %s", r.Image, err, out.String())
	}
	return nil
}

// LayoutJobs lays the jobs of a release source tree out under dst as a
// release image ships them: dst/<job>/job.MF (the spec), monit, templates/.
func LayoutJobs(releaseDir, dst string) error {
	jobs, err := filepath.Glob(filepath.Join(releaseDir, "jobs", "*"))
	if err != nil || len(jobs) == 0 {
		return fmt.Errorf("release %s has no jobs/", releaseDir)
	}
	for _, job := range jobs {
		out := filepath.Join(dst, filepath.Base(job))
		if err := copyTree(job, out); err != nil {
			return err
		}
		// A compiled release ships the job spec as job.MF.
		if err := os.Rename(filepath.Join(out, "spec"), filepath.Join(out, "job.MF")); err != nil {
			return fmt.Errorf("job %s: %w", filepath.Base(job), err)
		}
	}
	return nil
}

func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		return copyFile(path, filepath.Join(dst, rel), 0o644)
	})
}

func copyFile(src, dst string, mode os.FileMode) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	return os.WriteFile(dst, data, mode)
}
