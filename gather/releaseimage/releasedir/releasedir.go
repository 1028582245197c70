// Package releasedir reads a BOSH release directory (a git checkout with
// src/, blobs/ or .blobs/, config/, jobs/*/spec and packages/*/spec) as
// `bosh create-release` does, without the bosh CLI: package files from the
// specs' globs over src/ and blobs/, excluded_files, bosh-cli's v2
// fingerprints, vendored packages (spec.lock) and the release's version
// from its final release manifests. It writes what a release tarball holds
// (release.MF, jobs/<job>.tgz, packages/<package>.tgz) into a directory, so
// the directory becomes the same release as its tarball would.
package releasedir

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Release is a release directory read: its jobs and packages with their
// files and fingerprints, nothing written yet.
type Release struct {
	Dir        string
	Name       string
	Version    string
	CommitHash string
	// Final is set when the jobs and packages are those of a final release
	// in releases/<name>/, whose version Version then is.
	Final    bool
	Jobs     []Job
	Packages []Package
}

// Job is a job of the release.
type Job struct {
	Name        string
	Fingerprint string
	files       []file
}

// Package is a package of the release.
type Package struct {
	Name         string
	Fingerprint  string
	Dependencies []string
	// Vendored packages have only a spec.lock: their files come from
	// elsewhere (Resolve); StandIn names the directory standing in for one.
	Vendored bool
	StandIn  string
	// Missing, when set, says why the package's archive cannot be made
	// (a blob not downloaded): an error only when the package is built.
	Missing string
	files   []file
}

// Options are how a directory is read.
type Options struct {
	// StandIns are directories standing in for vendored packages, by
	// package name: each holds the package's packaging script and the
	// files it needs, as the package's archive would.
	StandIns map[string]string
}

// Read reads the release directory dir.
func Read(dir string, opts Options) (*Release, error) {
	r := &Release{Dir: dir}
	if err := r.readName(); err != nil {
		return nil, err
	}
	blobs, err := readBlobs(dir)
	if err != nil {
		return nil, err
	}
	src, err := listTree(filepath.Join(dir, "src"))
	if err != nil {
		return nil, fmt.Errorf("release directory %s: src: %w", dir, err)
	}
	pkgDirs, _ := filepath.Glob(filepath.Join(dir, "packages", "*"))
	for _, d := range pkgDirs {
		if info, err := os.Stat(d); err != nil || !info.IsDir() {
			continue
		}
		name := filepath.Base(d)
		p, err := readPackage(d, src, blobs, opts.StandIns[name])
		if err != nil {
			return nil, fmt.Errorf("release directory %s: package '%s': %w", dir, name, err)
		}
		r.Packages = append(r.Packages, p)
	}
	for name := range opts.StandIns {
		if !slices.ContainsFunc(r.Packages, func(p Package) bool { return p.Name == name && p.Vendored }) {
			return nil, fmt.Errorf("release directory %s: a stand-in is given for package '%s', which the release does not vendor (packages/%s/spec.lock)", dir, name, name)
		}
	}
	jobDirs, _ := filepath.Glob(filepath.Join(dir, "jobs", "*"))
	for _, d := range jobDirs {
		if info, err := os.Stat(d); err != nil || !info.IsDir() {
			continue
		}
		j, err := readJob(d)
		if err != nil {
			return nil, fmt.Errorf("release directory %s: job '%s': %w", dir, filepath.Base(d), err)
		}
		r.Jobs = append(r.Jobs, j)
	}
	if len(r.Jobs) == 0 && len(r.Packages) == 0 {
		return nil, fmt.Errorf("release directory %s has no jobs/*/spec and no packages/*/spec", dir)
	}
	if err := r.readVersion(); err != nil {
		return nil, err
	}
	return r, nil
}

// readName takes the release's name as bosh create-release does: from
// config/final.yml (name, or final_name of older releases), else
// config/dev.yml's dev_name.
func (r *Release) readName() error {
	name, err := Name(r.Dir)
	r.Name = name
	return err
}

// Name is the name of the release in directory dir: config/final.yml's
// name or final_name, else config/dev.yml's dev_name.
func Name(dir string) (string, error) {
	var final struct {
		Name      string `yaml:"name"`
		FinalName string `yaml:"final_name"`
	}
	var dev struct {
		DevName string `yaml:"dev_name"`
	}
	if err := readYAML(filepath.Join(dir, "config", "final.yml"), &final); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("release directory %s: %w", dir, err)
	}
	if err := readYAML(filepath.Join(dir, "config", "dev.yml"), &dev); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("release directory %s: %w", dir, err)
	}
	name := cmpOr(final.Name, final.FinalName, dev.DevName)
	if name == "" {
		return "", fmt.Errorf("release directory %s: no release name: config/final.yml has no name (is it a release directory?)", dir)
	}
	return name, nil
}

func cmpOr(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

func readYAML(file string, v any) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	if err := yaml.Unmarshal(data, v); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	return nil
}

// readPackage reads packages/<name>: its spec.lock when vendored, else its
// spec, packaging script and the files its globs match.
func readPackage(dir string, src, blobs map[string]treeFile, standIn string) (Package, error) {
	name := filepath.Base(dir)
	var lock struct {
		Name         string   `yaml:"name"`
		Fingerprint  string   `yaml:"fingerprint"`
		Dependencies []string `yaml:"dependencies"`
	}
	switch err := readYAML(filepath.Join(dir, "spec.lock"), &lock); {
	case err == nil:
		if lock.Name != name || lock.Fingerprint == "" {
			return Package{}, fmt.Errorf("spec.lock: name '%s' and a fingerprint expected", name)
		}
		p := Package{Name: name, Fingerprint: lock.Fingerprint, Dependencies: lock.Dependencies, Vendored: true}
		if standIn != "" {
			return p.standIn(standIn)
		}
		return p, nil
	case !errors.Is(err, fs.ErrNotExist):
		return Package{}, err
	}
	var spec struct {
		Name          string   `yaml:"name"`
		Dependencies  []string `yaml:"dependencies"`
		Files         []string `yaml:"files"`
		ExcludedFiles []string `yaml:"excluded_files"`
	}
	if err := readYAML(filepath.Join(dir, "spec"), &spec); err != nil {
		return Package{}, err
	}
	if spec.Name != name {
		return Package{}, fmt.Errorf("spec: name '%s' is not the directory's name", spec.Name)
	}
	if _, err := os.Lstat(filepath.Join(dir, "pre_packaging")); err == nil {
		return Package{}, errors.New("pre_packaging scripts are not run (bosh create-release runs them on the machine creating the release): create the release tarball with bosh create-release --tarball and give that")
	}
	packaging := filepath.Join(dir, "packaging")
	if _, err := os.Stat(packaging); err != nil {
		return Package{}, fmt.Errorf("expected to find '%s'", packaging)
	}
	files := []file{{name: "packaging", source: packaging, noMode: true}}
	chosen := map[string]treeFile{}
	missing := ""
	for _, g := range spec.Files {
		pat, err := compile(g)
		if err != nil {
			return Package{}, fmt.Errorf("spec files: %w", err)
		}
		found := false
		// bosh-cli looks in src/ before blobs/; a path both hold is
		// src/'s.
		for _, tree := range []map[string]treeFile{src, blobs} {
			for rel, tf := range tree {
				if !pat.match(rel) {
					continue
				}
				found = true
				if _, dup := chosen[rel]; !dup {
					chosen[rel] = tf
				}
			}
		}
		if !found {
			// bosh-cli fails here; a deployment may not need the package
			// (routing-release's acceptance_tests, its submodule not
			// checked out), so only building it fails.
			missing = cmpOr(missing, fmt.Sprintf("spec files: missing files for pattern '%s' (in src/ and blobs/; a git submodule not checked out? `git submodule update --init`)", g))
		}
	}
	for _, g := range spec.ExcludedFiles {
		pat, err := compile(g)
		if err != nil {
			return Package{}, fmt.Errorf("spec excluded_files: %w", err)
		}
		for rel := range chosen {
			if pat.match(rel) {
				delete(chosen, rel)
			}
		}
	}
	if _, ok := chosen["packaging"]; ok {
		return Package{}, errors.New("spec files: the special file 'packaging' must not be included through files")
	}
	for _, rel := range sortedKeys(chosen) {
		tf := chosen[rel]
		if tf.missing != "" {
			if tf.digest == "" {
				return Package{}, fmt.Errorf("spec files: %s", tf.missing)
			}
			missing = cmpOr(missing, "spec files: "+tf.missing)
		}
		files = append(files, file{name: rel, source: tf.path, link: tf.link, digest: tf.digest, exec: tf.exec})
	}
	fp, err := fingerprint(files, spec.Dependencies)
	if err != nil {
		return Package{}, err
	}
	return Package{Name: name, Fingerprint: fp, Dependencies: spec.Dependencies, Missing: missing, files: files}, nil
}

// standIn makes vendored package p from directory dir: every file in it,
// its packaging script required. Its fingerprint is computed from those
// files, not the spec.lock's, so its compiled result is never taken for
// the real package's.
func (p Package) standIn(dir string) (Package, error) {
	tree, err := listTree(dir)
	if err != nil {
		return Package{}, fmt.Errorf("stand-in %s: %w", dir, err)
	}
	if _, ok := tree["packaging"]; !ok {
		return Package{}, fmt.Errorf("stand-in %s has no packaging script", dir)
	}
	var files []file
	for _, rel := range sortedKeys(tree) {
		tf := tree[rel]
		files = append(files, file{name: rel, source: tf.path, link: tf.link, exec: tf.exec, noMode: rel == "packaging"})
	}
	fp, err := fingerprint(files, p.Dependencies)
	if err != nil {
		return Package{}, fmt.Errorf("stand-in %s: %w", dir, err)
	}
	p.Fingerprint, p.StandIn, p.files = fp, dir, files
	return p, nil
}

// readJob reads jobs/<name>: the spec (as job.MF), monit,
// properties_schema.json and the templates the spec names, symlinks
// followed, as bosh-cli's job reader does.
func readJob(dir string) (Job, error) {
	name := filepath.Base(dir)
	var spec struct {
		Name      string            `yaml:"name"`
		Templates map[string]string `yaml:"templates"`
	}
	specPath := filepath.Join(dir, "spec")
	if err := readYAML(specPath, &spec); err != nil {
		return Job{}, err
	}
	if spec.Name != name {
		return Job{}, fmt.Errorf("job directory '%s' does not match job name '%s' in spec", name, spec.Name)
	}
	files := []file{{name: "job.MF", source: specPath}}
	for _, extra := range []string{"monit", "properties_schema.json"} {
		if _, err := os.Stat(filepath.Join(dir, extra)); err == nil {
			files = append(files, file{name: extra, source: filepath.Join(dir, extra)})
		}
	}
	for src := range spec.Templates {
		if !filepath.IsLocal(src) {
			return Job{}, fmt.Errorf("spec templates: '%s' is not a path inside templates/", src)
		}
		files = append(files, file{name: path.Join("templates", filepath.ToSlash(src)), source: filepath.Join(dir, "templates", src)})
	}
	for i := range files {
		// bosh-cli reads the mode without following a symlink (0777,
		// "100755"), and the content through it.
		info, err := os.Lstat(files[i].source)
		if err != nil {
			return Job{}, fmt.Errorf("%s: %w", files[i].name, err)
		}
		files[i].exec = info.Mode()&0o111 != 0
	}
	fp, err := fingerprint(files, nil)
	if err != nil {
		return Job{}, err
	}
	return Job{Name: name, Fingerprint: fp, files: files}, nil
}

// treeFile is a file of src/, blobs/ or a stand-in, by its relative path.
type treeFile struct {
	path string
	link string
	exec bool
	// missing, when set, says why a blob config/blobs.yml lists has no
	// content here, and digest is its sha256 digest from there (which
	// fingerprints it all the same).
	missing, digest string
}

// listTree lists the files under root (symlinks to files included, as
// links; directories reached through symlinks not entered, as bosh-cli
// leaves out files whose real path is elsewhere). A missing root is empty.
func listTree(root string) (map[string]treeFile, error) {
	out := map[string]treeFile{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) && p == root {
			return filepath.SkipDir
		}
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if d.Type()&fs.ModeSymlink != 0 {
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			if info, err := os.Stat(p); err == nil && info.IsDir() {
				return nil
			}
			out[rel] = treeFile{path: p, link: target}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		out[rel] = treeFile{path: p, exec: info.Mode()&0o111 != 0}
		return nil
	})
	return out, err
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// readBlobs lists the release's blobs: the files in blobs/ (as bosh-cli
// globs them), and every blob config/blobs.yml lists that is not there,
// from .blobs/<sha1> where older CLIs kept them, else marked missing.
// Blobs in blobs/ are read through symlinks (older CLIs linked them into
// .blobs/).
func readBlobs(dir string) (map[string]treeFile, error) {
	tree, err := listTree(filepath.Join(dir, "blobs"))
	if err != nil {
		return nil, fmt.Errorf("release directory %s: blobs: %w", dir, err)
	}
	for rel, tf := range tree {
		if tf.link != "" {
			tree[rel] = treeFile{path: tf.path}
		}
	}
	var index map[string]struct {
		SHA  string `yaml:"sha"`
		Size int64  `yaml:"size"`
	}
	if err := readYAML(filepath.Join(dir, "config", "blobs.yml"), &index); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("release directory %s: %w", dir, err)
	}
	for rel, b := range index {
		if _, ok := tree[rel]; ok {
			continue
		}
		cached := filepath.Join(dir, ".blobs", strings.TrimPrefix(b.SHA, "sha256:"))
		if info, err := os.Stat(cached); err == nil && info.Mode().IsRegular() {
			tree[rel] = treeFile{path: cached}
			continue
		}
		digest := ""
		if strings.HasPrefix(b.SHA, "sha256:") {
			digest = b.SHA
		}
		tree[rel] = treeFile{digest: digest, missing: fmt.Sprintf("blob '%s' (config/blobs.yml, %d bytes) is in neither blobs/ nor .blobs/: download it with `bosh sync-blobs`, or put the file at %s",
			rel, b.Size, filepath.Join(dir, "blobs", filepath.FromSlash(rel)))}
	}
	return tree, nil
}

// readVersion names the release's version as bosh create-release would:
// the final release whose jobs and packages have exactly these
// fingerprints (a checkout of a final release's commit), else the next dev
// version after the latest final one, "<latest>+dev.1".
func (r *Release) readVersion() error {
	finals, _ := filepath.Glob(filepath.Join(r.Dir, "releases", r.Name, r.Name+"-*.yml"))
	want := r.fingerprints()
	latest := ""
	for _, f := range finals {
		var m struct {
			Version    string `yaml:"version"`
			CommitHash string `yaml:"commit_hash"`
			Jobs       []struct {
				Name, Fingerprint string
			} `yaml:"jobs"`
			Packages []struct {
				Name, Fingerprint string
			} `yaml:"packages"`
		}
		if err := readYAML(f, &m); err != nil || m.Version == "" {
			continue
		}
		if latest == "" || compareVersions(m.Version, latest) > 0 {
			latest = m.Version
		}
		got := map[string]string{}
		for _, j := range m.Jobs {
			got["job/"+j.Name] = j.Fingerprint
		}
		for _, p := range m.Packages {
			got["package/"+p.Name] = p.Fingerprint
		}
		if maps.Equal(got, want) {
			r.Version, r.CommitHash, r.Final = m.Version, m.CommitHash, true
			return nil
		}
	}
	r.Version = cmpOr(latest, "0") + "+dev.1"
	r.CommitHash = "unknown"
	if out, err := exec.Command("git", "-C", r.Dir, "rev-parse", "--short=8", "HEAD").Output(); err == nil {
		r.CommitHash = strings.TrimSpace(string(out))
	}
	return nil
}

func (r *Release) fingerprints() map[string]string {
	out := map[string]string{}
	for _, j := range r.Jobs {
		out["job/"+j.Name] = j.Fingerprint
	}
	for _, p := range r.Packages {
		out["package/"+p.Name] = p.Fingerprint
	}
	return out
}

// compareVersions orders release versions by their dot-separated parts,
// numerically where both are numbers.
func compareVersions(a, b string) int {
	pa, pb := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(pa) && i < len(pb); i++ {
		na, ea := strconv.Atoi(pa[i])
		nb, eb := strconv.Atoi(pb[i])
		switch {
		case ea == nil && eb == nil && na != nb:
			if na < nb {
				return -1
			}
			return 1
		case (ea != nil || eb != nil) && pa[i] != pb[i]:
			return strings.Compare(pa[i], pb[i])
		}
	}
	return len(pa) - len(pb)
}
