package releasedir

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/bosh-injector/bosh-injector/gather/releaseimage/layer"
)

// Find looks for the archive of vendored package name with fingerprint
// among the other releases given, saying where it is and its release.MF
// digest ("" when none).
type Find func(name, fingerprint string) (archive, digest string)

// Written is an archive Write wrote (or took): its digest as release.MF
// gives it; or, for a package whose files are not all here, Missing says
// why, and there is no archive.
type Written struct {
	Digest  string
	Missing string
}

// Write writes the release's archives as a release tarball holds them:
// out/jobs/<job>.tgz and out/packages/<package>.tgz. A vendored package's
// archive comes from find (another release given), else from bosh-cli's
// local cache (~/.bosh/cache, by the digest the release's
// .final_builds/packages/<name>/index.yml records), else it is Missing,
// naming the package and what to give. It returns what it wrote by "job/"
// or "package/" and name.
func (r *Release) Write(out string, find Find) (map[string]Written, error) {
	written := map[string]Written{}
	for _, kind := range []string{"jobs", "packages"} {
		if err := os.MkdirAll(filepath.Join(out, kind), 0o755); err != nil {
			return nil, err
		}
	}
	for _, j := range r.Jobs {
		d, err := writeArchive(filepath.Join(out, "jobs", j.Name+".tgz"), j.files, true)
		if err != nil {
			return nil, fmt.Errorf("release directory %s: job '%s': %w", r.Dir, j.Name, err)
		}
		written["job/"+j.Name] = Written{Digest: d}
	}
	for _, p := range r.Packages {
		dst := filepath.Join(out, "packages", p.Name+".tgz")
		if p.Missing != "" {
			written["package/"+p.Name] = Written{Missing: p.Missing}
			continue
		}
		if !p.Vendored || p.StandIn != "" {
			d, err := writeArchive(dst, p.files, false)
			if err != nil {
				return nil, fmt.Errorf("release directory %s: package '%s': %w", r.Dir, p.Name, err)
			}
			written["package/"+p.Name] = Written{Digest: d}
			continue
		}
		archive, digest := "", ""
		if find != nil {
			archive, digest = find(p.Name, p.Fingerprint)
		}
		if archive == "" {
			archive, digest = r.boshCache(p)
		}
		if archive == "" {
			written["package/"+p.Name] = Written{Missing: fmt.Sprintf("it is vendored (packages/%s/spec.lock, fingerprint %s) and its files are not here: give the release it comes from too (its directory at a version with this fingerprint, or its tarball), or a directory standing in for it with --stand-in %s=DIR (its packaging script and files)",
				p.Name, p.Fingerprint, p.Name)}
			continue
		}
		if err := copyFile(archive, dst); err != nil {
			return nil, fmt.Errorf("release directory %s: package '%s': %w", r.Dir, p.Name, err)
		}
		written["package/"+p.Name] = Written{Digest: digest}
	}
	return written, nil
}

// boshCache finds vendored package p in bosh-cli's local cache of final
// builds, where `bosh create-release` or `bosh sync-blobs` left it.
func (r *Release) boshCache(p Package) (archive, digest string) {
	var index struct {
		Builds map[string]struct {
			SHA1 string `yaml:"sha1"`
		} `yaml:"builds"`
	}
	if err := readYAML(filepath.Join(r.Dir, ".final_builds", "packages", p.Name, "index.yml"), &index); err != nil {
		return "", ""
	}
	b, ok := index.Builds[p.Fingerprint]
	home, err := os.UserHomeDir()
	if !ok || b.SHA1 == "" || err != nil || strings.ContainsAny(b.SHA1, `/\`) {
		return "", ""
	}
	cached := filepath.Join(home, ".bosh", "cache", b.SHA1)
	if info, err := os.Stat(cached); err != nil || !info.Mode().IsRegular() {
		return "", ""
	}
	return cached, b.SHA1
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	return layer.WriteFile(dst, in, 0o644)
}

// writeArchive writes files as bosh-cli stages and compresses them: members
// ./<path>, executables 0755 and the rest 0644, parent directories first;
// jobs follow symlinks, packages keep them. Times and owners are fixed so
// the same files give the same archive. It returns the archive's sha256
// digest in release.MF's form.
func writeArchive(dst string, files []file, follow bool) (string, error) {
	f, err := os.Create(dst)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	gz, _ := gzip.NewWriterLevel(io.MultiWriter(f, h), gzip.BestSpeed)
	tw := tar.NewWriter(gz)
	err = writeMembers(tw, files, follow)
	err = errors.Join(err, tw.Close(), gz.Close(), f.Close())
	if err != nil {
		return "", err
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

func writeMembers(tw *tar.Writer, files []file, follow bool) error {
	epoch := time.Unix(0, 0)
	dirs := map[string]bool{}
	for _, f := range files {
		for d := path.Dir(f.name); d != "."; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: "./", Mode: 0o755, ModTime: epoch}); err != nil {
		return err
	}
	for _, d := range sortedKeys(dirs) {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: "./" + d + "/", Mode: 0o755, ModTime: epoch}); err != nil {
			return err
		}
	}
	for _, f := range slices.SortedFunc(slices.Values(files), func(a, b file) int { return strings.Compare(a.name, b.name) }) {
		if f.link != "" && !follow {
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: "./" + f.name, Linkname: f.link, Mode: 0o777, ModTime: epoch}); err != nil {
				return err
			}
			continue
		}
		if err := writeMember(tw, f, epoch); err != nil {
			return fmt.Errorf("%s: %w", f.name, err)
		}
	}
	return nil
}

func writeMember(tw *tar.Writer, f file, epoch time.Time) error {
	in, err := os.Open(f.source)
	if err != nil {
		return err
	}
	defer in.Close()
	info, err := in.Stat()
	if err != nil {
		return err
	}
	if !info.Mode().IsRegular() {
		return fmt.Errorf("not a regular file")
	}
	mode := int64(0o644)
	if info.Mode()&fs.ModePerm&0o100 != 0 {
		mode = 0o755
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "./" + f.name, Mode: mode, Size: info.Size(), ModTime: epoch}); err != nil {
		return err
	}
	_, err = io.Copy(tw, in)
	return err
}
