package releaseimage

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/go-logr/logr"

	"github.com/bosh-injector/bosh-injector/gather/releaseimage/releasedir"
)

// isDir says whether a release argument is a release directory rather
// than a tarball.
func isDir(path string) bool {
	info, err := os.Stat(path)
	return err == nil && info.IsDir()
}

// openDirs reads release directories into releases of the tarball model:
// each directory's archives are written under work as its tarball would
// hold them. A vendored package comes from a stand-in (standIns, by
// package name), else from another release given (tarballs, and the
// directories read before it: those vendoring nothing go first), else
// from bosh-cli's local cache.
func openDirs(dirs []string, tarballs []*Release, standIns map[string]string, work string, log logr.Logger) ([]*Release, error) {
	var read []*releasedir.Release
	used := map[string]bool{}
	for _, d := range dirs {
		own := map[string]string{}
		for name, dir := range standIns {
			if vendors(d, name) {
				own[name] = dir
				used[name] = true
			}
		}
		rd, err := releasedir.Read(d, releasedir.Options{StandIns: own})
		if err != nil {
			return nil, err
		}
		for _, p := range rd.Packages {
			if p.StandIn != "" {
				log.Info("WARNING: a stand-in replaces a vendored package", "release", rd.Name, "package", p.Name, "stand-in", p.StandIn)
			}
		}
		read = append(read, rd)
	}
	for name := range standIns {
		if !used[name] {
			return nil, fmt.Errorf("--stand-in %s: no release directory given vendors package '%s' (packages/%s/spec.lock)", name, name, name)
		}
	}
	sort.SliceStable(read, func(i, j int) bool { return unresolved(read[i]) < unresolved(read[j]) })
	var out []*Release
	// A package vendored with a prefix (routing-release's
	// routing-healthchecker is healthchecker-release's healthchecker) keeps
	// its fingerprint.
	find := func(name, fingerprint string) (string, string) {
		for _, r := range slices.Concat(tarballs, out) {
			for _, p := range r.Manifest.Packages {
				if p.Fingerprint == fingerprint && (p.Name == name || strings.HasSuffix(name, "-"+p.Name)) && r.missing[p.Name] == "" {
					return r.PackageArchive(p.Name), p.SHA1
				}
			}
		}
		return "", ""
	}
	for i, rd := range read {
		dir := filepath.Join(work, fmt.Sprint(i))
		written, err := rd.Write(dir, find)
		if err != nil {
			return nil, err
		}
		m := Manifest{Name: rd.Name, Version: rd.Version, CommitHash: rd.CommitHash}
		for _, j := range rd.Jobs {
			m.Jobs = append(m.Jobs, Entry{Name: j.Name, Version: j.Fingerprint, Fingerprint: j.Fingerprint, SHA1: written["job/"+j.Name].Digest})
		}
		missing := map[string]string{}
		for _, p := range rd.Packages {
			w := written["package/"+p.Name]
			m.Packages = append(m.Packages, Entry{Name: p.Name, Version: p.Fingerprint, Fingerprint: p.Fingerprint,
				SHA1: w.Digest, Dependencies: p.Dependencies})
			if w.Missing != "" {
				missing[p.Name] = fmt.Sprintf("release directory %s: package '%s': %s", rd.Dir, p.Name, w.Missing)
			}
		}
		if err := m.checkNames(); err != nil {
			return nil, fmt.Errorf("release directory %s: %w", rd.Dir, err)
		}
		log.Info("read release directory", "release", m.Name, "version", m.Version, "final", rd.Final, "directory", rd.Dir)
		out = append(out, &Release{Path: rd.Dir, Manifest: m, dir: dir, missing: missing})
	}
	return out, nil
}

// vendors says whether release directory dir vendors package name.
func vendors(dir, name string) bool {
	_, err := os.Stat(filepath.Join(dir, "packages", name, "spec.lock"))
	return err == nil
}

// unresolved counts the vendored packages of r no stand-in replaces.
func unresolved(r *releasedir.Release) int {
	n := 0
	for _, p := range r.Packages {
		if p.Vendored && p.StandIn == "" {
			n++
		}
	}
	return n
}
