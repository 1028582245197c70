// Package releaseimage turns BOSH release tarballs (source releases from
// `bosh create-release --tarball`, compiled ones from `bosh export-release`)
// into OCI images in the layout bosh-injector's copy and gathering containers
// read: every job under /var/vcap/jobs-src/<job>/ (job.MF, monit,
// templates/) and every package under /var/vcap/packages/<package>/. Source
// packages are compiled by the compile package; this one reads and checks
// tarballs, assembles reproducible images and writes them out.
package releaseimage

import (
	"archive/tar"
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/bosh-injector/bosh-injector/gather/names"
	"github.com/bosh-injector/bosh-injector/gather/releaseimage/layer"
)

// Manifest is a release tarball's release.MF.
type Manifest struct {
	Name               string  `yaml:"name"`
	Version            string  `yaml:"version"`
	CommitHash         string  `yaml:"commit_hash"`
	UncommittedChanges bool    `yaml:"uncommitted_changes"`
	Jobs               []Entry `yaml:"jobs"`
	Packages           []Entry `yaml:"packages,omitempty"`
	CompiledPackages   []Entry `yaml:"compiled_packages,omitempty"`
}

// Entry is a job, package or compiled package of release.MF.
type Entry struct {
	Name         string   `yaml:"name"`
	Version      string   `yaml:"version"`
	Fingerprint  string   `yaml:"fingerprint"`
	SHA1         string   `yaml:"sha1"`
	Dependencies []string `yaml:"dependencies,omitempty"`
	// Stemcell is "<os>/<version>" a compiled package was compiled on.
	Stemcell string `yaml:"stemcell,omitempty"`
}

// Release is a release tarball unpacked into a work directory, every job and
// package archive checked against its digest in release.MF.
type Release struct {
	Path     string
	Manifest Manifest
	// Used, when not nil, are the jobs a deployment uses: Build compiles
	// only their packages and those packages' dependencies, as a director
	// compiles only what the deployment's jobs need.
	Used map[string]bool
	dir  string
	// missing are the packages of a release directory that have no
	// archive, with why: an error when they are to be compiled.
	missing map[string]string
}

// Archive kinds: the directories of a release tarball.
const (
	kindJobs             = "jobs"
	kindPackages         = "packages"
	kindCompiledPackages = "compiled_packages"
)

// JobArchive is the path of job name's .tgz.
func (r *Release) JobArchive(name string) string { return r.archive(kindJobs, name) }

// PackageArchive is the path of source package name's .tgz.
func (r *Release) PackageArchive(name string) string { return r.archive(kindPackages, name) }

// CompiledArchive is the path of compiled package name's .tgz.
func (r *Release) CompiledArchive(name string) string { return r.archive(kindCompiledPackages, name) }

func (r *Release) archive(kind, name string) string { return filepath.Join(r.dir, kind, name+".tgz") }

// Open unpacks the release tarball at path into work (which must exist) and
// checks it: release.MF present and complete, every listed archive present
// with its sha1 (or `sha256:`/`sha512:` digest) matching. Only the archives
// release.MF lists are written to work: the tarball is read once for
// release.MF, then again for them. ctx ends either read.
func Open(ctx context.Context, path, work string) (*Release, error) {
	r := &Release{Path: path, dir: work}
	var data []byte
	err := r.each(ctx, func(name string, h *tar.Header, tr io.Reader) (bool, error) {
		if name != "release.MF" {
			return false, nil
		}
		if h.Size > maxReleaseMF {
			return false, fmt.Errorf("release.MF: %d bytes, more than the %d MiB a release.MF may be", h.Size, maxReleaseMF>>20)
		}
		var err error
		data, err = io.ReadAll(tr)
		return true, err
	})
	if err != nil {
		return nil, fmt.Errorf("release tarball %s: %w", path, err)
	}
	if data == nil {
		return nil, fmt.Errorf("release tarball %s: no release.MF", path)
	}
	if err := yaml.Unmarshal(data, &r.Manifest); err != nil {
		return nil, fmt.Errorf("release tarball %s: release.MF: %w", path, err)
	}
	m := &r.Manifest
	if m.Name == "" || m.Version == "" {
		return nil, fmt.Errorf("release tarball %s: release.MF has no name or version", path)
	}
	if err := m.checkNames(); err != nil {
		return nil, fmt.Errorf("release tarball %s: release.MF: %w", path, err)
	}
	sets := []struct {
		kind    string
		entries []Entry
	}{{kindJobs, m.Jobs}, {kindPackages, m.Packages}, {kindCompiledPackages, m.CompiledPackages}}
	listed := map[string]bool{}
	for _, set := range sets {
		for _, e := range set.entries {
			listed[set.kind+"/"+e.Name+".tgz"] = true
		}
	}
	err = r.each(ctx, func(name string, _ *tar.Header, tr io.Reader) (bool, error) {
		if !listed[name] {
			return false, nil
		}
		return false, layer.WriteFile(filepath.Join(r.dir, filepath.FromSlash(name)), tr, 0o644)
	})
	if err != nil {
		return nil, fmt.Errorf("release tarball %s: %w", path, err)
	}
	for _, set := range sets {
		for _, e := range set.entries {
			if err := verify(r.archive(set.kind, e.Name), e.SHA1); err != nil {
				return nil, fmt.Errorf("release '%s' %s: %s/%s.tgz: %w", m.Name, path, set.kind, e.Name, err)
			}
		}
	}
	return r, nil
}

// each passes each regular member of the tarball to do, as layer.Walk
// does, until do says it is done or fails (its error names the member).
func (r *Release) each(ctx context.Context, do func(name string, h *tar.Header, tr io.Reader) (done bool, err error)) error {
	f, err := os.Open(r.Path)
	if err != nil {
		return err
	}
	defer f.Close()
	return layer.Walk(ctxReader{ctx, f}, false, func(name string, h *tar.Header, tr io.Reader) error {
		if h.Typeflag != tar.TypeReg {
			return nil
		}
		done, err := do(name, h, tr)
		if err == nil && done {
			return layer.ErrStop
		}
		return err
	})
}

// ctxReader fails its reads once ctx ends, so SIGTERM stops an extraction
// between two reads.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// maxReleaseMF bounds the release.MF read into memory; the largest real
// ones are a few hundred KiB.
const maxReleaseMF = 16 << 20

// checkNames fails on a job or package name that could not be a directory
// of its own (names.PathName) and on one listed twice: both come from the
// tarball's author, and each becomes a path read from the tarball and
// written into the image.
func (m *Manifest) checkNames() error {
	if err := names.PathName("release", m.Name); err != nil {
		return err
	}
	for _, set := range []struct {
		what    string
		entries []Entry
	}{{"job", m.Jobs}, {"package", m.Packages}, {"compiled package", m.CompiledPackages}} {
		seen := map[string]bool{}
		for _, e := range set.entries {
			if err := names.PathName(set.what, e.Name); err != nil {
				return err
			}
			if seen[e.Name] {
				return fmt.Errorf("%s '%s' is listed twice", set.what, e.Name)
			}
			seen[e.Name] = true
			for _, d := range e.Dependencies {
				if err := names.PathName("package", d); err != nil {
					return fmt.Errorf("%s '%s' dependencies: %w", set.what, e.Name, err)
				}
			}
		}
	}
	return nil
}

// verify checks file against a release.MF digest: a bare sha1, or BOSH's
// multi-digest form "algo:hex;algo:hex" (sha1, sha256, sha512), every
// listed digest matching.
func verify(file, digest string) error {
	if digest == "" {
		return errors.New("release.MF gives no sha1")
	}
	type check struct {
		algo, want string
		h          hash.Hash
	}
	var checks []check
	for _, d := range strings.Split(digest, ";") {
		algo, want, ok := strings.Cut(d, ":")
		if !ok {
			algo, want = "sha1", d
		}
		var h hash.Hash
		switch algo {
		case "sha1":
			h = sha1.New()
		case "sha256":
			h = sha256.New()
		case "sha512":
			h = sha512.New()
		default:
			return fmt.Errorf("unsupported digest algorithm %q", algo)
		}
		checks = append(checks, check{algo, want, h})
	}
	f, err := os.Open(file)
	if errors.Is(err, os.ErrNotExist) {
		return errors.New("missing from the tarball")
	}
	if err != nil {
		return err
	}
	defer f.Close()
	ws := make([]io.Writer, len(checks))
	for i, c := range checks {
		ws[i] = c.h
	}
	if _, err := io.Copy(io.MultiWriter(ws...), f); err != nil {
		return err
	}
	for _, c := range checks {
		if got := hex.EncodeToString(c.h.Sum(nil)); got != c.want {
			return fmt.Errorf("%s mismatch: release.MF says %s, the archive has %s", c.algo, c.want, got)
		}
	}
	return nil
}
