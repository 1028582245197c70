package releaseimage

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/go-logr/logr"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sync/errgroup"
	"gopkg.in/yaml.v3"

	"github.com/bosh-injector/bosh-injector/gather/model/manifest"
	"github.com/bosh-injector/bosh-injector/gather/names"
	"github.com/bosh-injector/bosh-injector/gather/releaseimage/compile"
)

// Config is one release-image invocation.
type Config struct {
	// Tarballs are release tarballs or release directories.
	Tarballs []string
	// StandIns are directories standing in for vendored packages of
	// release directories, by package name.
	StandIns map[string]string
	// Manifest, when set, is a deployment manifest: every release it names
	// is built, from Tarballs or from its url when that is a local file or
	// directory, on the manifest's stemcell unless StemcellOS and
	// StemcellVersion are set.
	Manifest []byte
	// Repository is the <url> of image names <url>/<release>:<tag>.
	Repository      string
	StemcellImage   string
	StemcellOS      string
	StemcellVersion string
	// Insecure allows plain-HTTP registries.
	Insecure bool
	// Outputs; none only builds and reports digests.
	Push      bool
	OCILayout string
	Load      bool
	Jobs      int
	CacheDir  string
	// CacheRepository, when set, is a registry repository sharing compiled
	// packages between machines, behind CacheDir.
	CacheRepository string
	// Engine compiles source packages; podman when nil.
	Engine compile.Engine
	Log    logr.Logger
}

// Result is one built image.
type Result struct {
	Release string
	Version string
	// Tag is the image name by the naming rule; Digest its manifest digest.
	Tag    string
	Digest string
}

// Ref is the image pinned by digest.
func (r Result) Ref() string {
	ref, err := name.ParseReference(r.Tag)
	if err != nil {
		return r.Tag + "@" + r.Digest
	}
	return ref.Context().Digest(r.Digest).String()
}

// FieldError is an error about Config fields, named by their Go names
// (Fields); a command line renames them to its flags before printing.
type FieldError struct {
	// Subject is what the error is about ("" or "release 'x': ").
	Subject string
	Fields  []string
	// Text follows the fields; Err, when set, follows Text.
	Text string
	Err  error
}

func (e *FieldError) Error() string {
	s := e.Subject + strings.Join(e.Fields, " and ") + e.Text
	if e.Err != nil {
		s += e.Err.Error()
	}
	return s
}

func (e *FieldError) Unwrap() error { return e.Err }

// build is one image to build: a release on a stemcell.
type build struct {
	release            *Release
	stemcellOS, stemVr string
}

// Run builds an image per release and, only when every one built, writes
// them out.
func Run(ctx context.Context, cfg Config) ([]Result, error) {
	if cfg.Repository == "" {
		return nil, &FieldError{Fields: []string{"Repository"}, Text: " is required: images are named <repository>/<release>:<stemcell os>-<stemcell version>-<release version>"}
	}
	if cfg.StemcellImage == "" {
		return nil, &FieldError{Fields: []string{"StemcellImage"}, Text: " is required"}
	}
	work, err := os.MkdirTemp("", "release-image-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)

	releases, err := openReleases(ctx, cfg, work)
	if err != nil {
		return nil, err
	}
	builds, err := planBuilds(ctx, cfg, releases, work)
	if err != nil {
		return nil, err
	}
	stemcell, err := OpenStemcell(ctx, cfg.StemcellImage, cfg.Insecure, filepath.Join(work, "stemcell"))
	if err != nil {
		return nil, err
	}
	compiler, err := newCompiler(cfg, stemcell)
	if err != nil {
		return nil, err
	}
	images, results, err := buildAll(ctx, cfg, builds, stemcell, compiler, work)
	if err != nil {
		return nil, err
	}
	if err := writeOut(ctx, cfg, images, results, work); err != nil {
		return nil, err
	}
	return results, nil
}

// openReleases opens the tarballs and release directories given, each
// release version once.
func openReleases(ctx context.Context, cfg Config, work string) ([]*Release, error) {
	var releases []*Release
	var dirs []string
	for i, t := range cfg.Tarballs {
		if isDir(t) {
			dirs = append(dirs, t)
			continue
		}
		r, err := openIn(ctx, t, filepath.Join(work, "releases", fmt.Sprint(i)))
		if err != nil {
			return nil, err
		}
		releases = append(releases, r)
	}
	fromDirs, err := openDirs(dirs, releases, cfg.StandIns, filepath.Join(work, "dirs"), cfg.Log)
	if err != nil {
		return nil, err
	}
	releases = append(releases, fromDirs...)
	if err := uniqueReleases(releases); err != nil {
		return nil, err
	}
	return releases, nil
}

// planBuilds is the images to build: every release given, or with a manifest
// every release it names on its stemcell; each must have an image name.
func planBuilds(ctx context.Context, cfg Config, releases []*Release, work string) ([]build, error) {
	var builds []build
	if cfg.Manifest != nil {
		m, err := manifest.Parse(cfg.Manifest)
		if err != nil {
			return nil, &FieldError{Fields: []string{"Manifest"}, Text: ": ", Err: err}
		}
		for i, mr := range m.Releases {
			r, err := forManifest(ctx, mr, releases, filepath.Join(work, "releases", fmt.Sprint("url-", i)), cfg)
			if err != nil {
				return nil, err
			}
			r.Used = usedJobs(m, mr.Name)

			s := mr.Stemcell
			if s == nil && len(m.Stemcells) == 1 {
				s = &m.Stemcells[0]
			}
			b := build{release: r, stemcellOS: cfg.StemcellOS, stemVr: cfg.StemcellVersion}
			if s != nil && b.stemcellOS == "" {
				b.stemcellOS = s.OS
			}
			if s != nil && b.stemVr == "" {
				b.stemVr = s.Version
			}
			builds = append(builds, b)
		}
		for _, r := range releases {
			if !slices.ContainsFunc(m.Releases, func(mr manifest.Release) bool { return mr.Name == r.Manifest.Name }) {
				cfg.Log.Info("not building a release the manifest does not name", "release", r.Manifest.Name, "tarball", r.Path)
			}
		}
	} else {
		for _, r := range releases {
			builds = append(builds, build{release: r, stemcellOS: cfg.StemcellOS, stemVr: cfg.StemcellVersion})
		}
	}
	if len(builds) == 0 {
		return nil, errors.New("no release tarballs given")
	}
	for _, b := range builds {
		if b.stemcellOS == "" || b.stemVr == "" {
			return nil, &FieldError{Subject: fmt.Sprintf("release '%s': ", b.release.Manifest.Name), Fields: []string{"StemcellOS", "StemcellVersion"}, Text: " are required to name its image"}
		}
		m := b.release.Manifest
		tag := Stemcell{OS: b.stemcellOS, Version: b.stemVr}.Tag(cfg.Repository, m)
		if _, err := name.NewTag(tag); err != nil {
			return nil, fmt.Errorf("release '%s' version '%s' (%s): its image name %s is not a valid image reference: %w", m.Name, m.Version, b.release.Path, tag, err)
		}
	}
	return builds, nil
}

// CompileData is the compilation VMs' /var/vcap/data kept beside the
// compiled packages' cache (none without one).
func CompileData(cacheDir string) string {
	if cacheDir == "" {
		return ""
	}
	return filepath.Join(cacheDir, "compile-data")
}

// newCompiler compiles on the stemcell with cfg's engine (podman by
// default) and caches.
func newCompiler(cfg Config, stemcell Stemcell) (*compile.Compiler, error) {
	engine := cfg.Engine
	if engine == nil {
		engine = compile.Podman{Insecure: cfg.Insecure, Data: CompileData(cfg.CacheDir)}
	}
	compiler := &compile.Compiler{Engine: engine, Stemcell: stemcell.Ref, StemcellID: stemcell.ID,
		CacheDir: cfg.CacheDir, Jobs: cfg.Jobs, Log: cfg.Log}
	if cfg.CacheRepository != "" {
		shared, err := newRegistryCache(cfg.CacheRepository, cfg.Insecure, stemcell.ID)
		if err != nil {
			return nil, err
		}
		compiler.Shared = shared
	}
	return compiler, nil
}

// buildAll builds the images at once: a package several releases vendor
// compiles once, and the compiler keeps to cfg.Jobs compiles overall.
func buildAll(ctx context.Context, cfg Config, builds []build, stemcell Stemcell, compiler *compile.Compiler, work string) ([]v1.Image, []Result, error) {
	images := make([]v1.Image, len(builds))
	results := make([]Result, len(builds))
	g, gctx := errgroup.WithContext(ctx)
	for i, b := range builds {
		g.Go(func() error {
			s := stemcell
			s.OS, s.Version = b.stemcellOS, b.stemVr
			m := b.release.Manifest
			img, err := Build(gctx, b.release, s, compiler, filepath.Join(work, "build", fmt.Sprint(i)))
			if err != nil {
				return err
			}
			d, err := img.Digest()
			if err != nil {
				return err
			}
			if cf, err := img.ConfigFile(); err == nil && cf.Config.Labels[names.ImageLabelSkippedPackages] != "" {
				cfg.Log.Info("packages not compiled: no job of the manifest needs them", "release", m.Name,
					"packages", cf.Config.Labels[names.ImageLabelSkippedPackages], "label", names.ImageLabelSkippedPackages)
			}
			images[i] = img
			results[i] = Result{Release: m.Name, Version: m.Version, Tag: s.Tag(cfg.Repository, m), Digest: d.String()}
			cfg.Log.Info("built release image", "release", m.Name, "version", m.Version, "image", results[i].Tag, "digest", d.String())
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, nil, err
	}
	return images, results, nil
}

// writeOut pushes the images, adds them to the OCI layout and loads them,
// as cfg asks.
func writeOut(ctx context.Context, cfg Config, images []v1.Image, results []Result, work string) error {
	if cfg.Push {
		tags := make([]string, len(results))
		for i, r := range results {
			tags[i] = r.Tag
		}
		if err := Push(ctx, tags, images, cfg.Insecure); err != nil {
			return err
		}
	}
	for i, img := range images {
		tag := results[i].Tag
		if cfg.OCILayout != "" {
			if err := WriteLayout(cfg.OCILayout, tag, img); err != nil {
				return err
			}
		}
		if cfg.Load {
			if err := Load(ctx, tag, img, work); err != nil {
				return err
			}
		}
	}
	return nil
}

// uniqueReleases fails on two tarballs of one release version: which one
// the image holds would depend on the order given.
func uniqueReleases(releases []*Release) error {
	first := map[[2]string]string{}
	for _, r := range releases {
		key := [2]string{r.Manifest.Name, r.Manifest.Version}
		if p, dup := first[key]; dup {
			return fmt.Errorf("release '%s' version '%s' is given twice: %s and %s", key[0], key[1], p, r.Path)
		}
		first[key] = r.Path
	}
	return nil
}

func openIn(ctx context.Context, path, work string) (*Release, error) {
	if err := os.MkdirAll(work, 0o755); err != nil {
		return nil, err
	}
	return Open(ctx, path, work)
}

// forManifest finds the tarball of manifest release mr: one given whose
// release.MF has its name, else its url when that is a local file or
// release directory.
func forManifest(ctx context.Context, mr manifest.Release, given []*Release, work string, cfg Config) (*Release, error) {
	for _, r := range given {
		if r.Manifest.Name != mr.Name {
			continue
		}
		if mr.Version != "" && mr.Version != "latest" && mr.Version != r.Manifest.Version {
			return nil, fmt.Errorf("release '%s': the manifest wants version %s, %s has %s%s", mr.Name, mr.Version, r.Path, r.Manifest.Version, devHint(r))
		}
		return r, nil
	}
	if path := localPath(mr.URL); path != "" {
		var r *Release
		var err error
		if isDir(path) {
			var rs []*Release
			rs, err = openDirs([]string{path}, given, cfg.StandIns, work, cfg.Log)
			if err == nil {
				r = rs[0]
			}
		} else {
			r, err = openIn(ctx, path, work)
		}
		if err != nil {
			return nil, err
		}
		if r.Manifest.Name != mr.Name {
			return nil, fmt.Errorf("release '%s': its url %s holds release '%s'", mr.Name, mr.URL, r.Manifest.Name)
		}
		return r, nil
	}
	return nil, fmt.Errorf("release '%s': no tarball or release directory given for it and its url is not a local file or directory", mr.Name)
}

// usedJobs are the jobs of release the manifest's instance groups (their
// addons merged) use.
func usedJobs(m *manifest.Manifest, release string) map[string]bool {
	used := map[string]bool{}
	for _, g := range m.InstanceGroups {
		for _, j := range g.Jobs {
			if j.Release == release {
				used[j.Name] = true
			}
		}
	}
	return used
}

// devHint explains a dev version of a release directory: its jobs or
// packages are no final release's.
func devHint(r *Release) string {
	if !strings.Contains(r.Manifest.Version, "+dev.") {
		return ""
	}
	return " (a dev version: the directory's jobs and packages match no final release in releases/" + r.Manifest.Name + "/; set the manifest's version to latest or " + r.Manifest.Version + ", or check out the release's tag)"
}

// localPath is the file or directory a release url names when it is a
// local path or a file:// URL of an existing one, else "".
func localPath(u string) string {
	p := u
	if rest, ok := strings.CutPrefix(u, "file://"); ok {
		if parsed, err := url.Parse(u); err == nil {
			rest = parsed.Path
		}
		p = rest
	}
	if info, err := os.Stat(p); err == nil && (info.Mode().IsRegular() || info.IsDir()) {
		return p
	}
	return ""
}

// OpsFile is the ops file pointing a manifest's releases at built images,
// pinned by digest.
func OpsFile(results []Result) ([]byte, error) {
	type op struct {
		Type  string `yaml:"type"`
		Path  string `yaml:"path"`
		Value string `yaml:"value"`
	}
	ops := make([]op, 0, len(results))
	for _, r := range results {
		ops = append(ops, op{Type: "replace", Path: "/releases/name=" + r.Release + "/image?", Value: r.Ref()})
	}
	return yaml.Marshal(ops)
}
