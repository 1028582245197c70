package releaseimage

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/bosh-injector/bosh-injector/gather/names"
	"github.com/bosh-injector/bosh-injector/gather/releaseimage/compile"
	"github.com/bosh-injector/bosh-injector/gather/releaseimage/layer"
)

// JobsDir is where a release image holds its jobs, as the copy containers
// read them: <JobsDir>/<job>/{job.MF,monit,templates/}.
const JobsDir = "/var/vcap/jobs-src"

// Stemcell is the base image releases are built on and compiled in.
type Stemcell struct {
	Image v1.Image
	// Ref is the image for the compile containers: pinned by digest in its
	// registry, or its ID in podman's storage.
	Ref string
	// Digest is the manifest's digest; ID the config's, the image ID, which
	// stays the same whether the image comes from a registry or from local
	// storage, compressed or not.
	Digest  string
	ID      string
	OS      string
	Version string
}

// Name is the stemcell as release.MF's compiled packages name it.
func (s Stemcell) Name() string { return s.OS + "/" + s.Version }

// Tag is the image name of release r under repository, by the naming rule
// the gathering and the webhook find release images with.
func (s Stemcell) Tag(repository string, m Manifest) string {
	return names.ReleaseImage(repository, m.Name, s.OS, s.Version, m.Version)
}

// Build assembles the image of release r on the stemcell: one layer per
// package (compiled packages as shipped, source packages compiled by c) and
// one for the jobs. Work files go under work.
func Build(ctx context.Context, r *Release, s Stemcell, c *compile.Compiler, work string) (v1.Image, error) {
	m := r.Manifest
	layers := map[string]string{}
	var sources []compile.Package
	compiled := map[string]bool{}
	for _, p := range m.CompiledPackages {
		compiled[p.Name] = true
	}
	// Source packages compile only against source packages compiled here:
	// a mixed release (one depending on a package shipped compiled) gets
	// this error rather than a "missing dependency" one.
	for _, p := range m.Packages {
		for _, d := range p.Dependencies {
			if !compiled[p.Name] && compiled[d] {
				return nil, fmt.Errorf("release '%s': source package '%s' depends on '%s', which the tarball holds compiled; release-image does not compile against compiled packages: give the release's source tarball",
					m.Name, p.Name, d)
			}
		}
	}
	for _, p := range m.CompiledPackages {
		if p.Stemcell != s.Name() {
			return nil, fmt.Errorf("release '%s': package '%s' is compiled for stemcell %s, not %s; give the release's source tarball or a stemcell it was compiled for",
				m.Name, p.Name, p.Stemcell, s.Name())
		}
		path := filepath.Join(work, "layers", p.Name+".tar.gz")
		if err := layer.Write(path, func(w *layer.Writer) error {
			return w.AddArchive(r.CompiledArchive(p.Name), compile.LayerPrefix(p.Name))
		}); err != nil {
			return nil, fmt.Errorf("release '%s': compiled package '%s': %w", m.Name, p.Name, err)
		}
		layers[p.Name] = path
	}
	needed, err := neededPackages(r, filepath.Join(work, "job-specs"))
	if err != nil {
		return nil, err
	}
	var skipped []string
	for _, p := range m.Packages {
		if needed != nil && !needed[p.Name] && !compiled[p.Name] {
			skipped = append(skipped, p.Name)
			continue
		}
		if why := r.missing[p.Name]; why != "" && !compiled[p.Name] {
			return nil, errors.New(why)
		}
		if !compiled[p.Name] {
			sources = append(sources, compile.Package{Name: p.Name, Version: p.Version, Fingerprint: p.Fingerprint,
				Dependencies: p.Dependencies, Source: r.PackageArchive(p.Name)})
		}
	}
	if len(sources) > 0 {
		if c == nil {
			return nil, fmt.Errorf("release '%s' has source packages and no compiler was given", m.Name)
		}
		built, err := c.Compile(ctx, m.Name, sources, filepath.Join(work, "compile"))
		if err != nil {
			return nil, err
		}
		for n, l := range built {
			layers[n] = l
		}
	}
	jobs := filepath.Join(work, "layers", "jobs.tar.gz")
	if err := layer.Write(jobs, func(w *layer.Writer) error {
		for _, j := range slices.SortedFunc(slices.Values(m.Jobs), func(a, b Entry) int { return strings.Compare(a.Name, b.Name) }) {
			if err := w.AddArchive(r.JobArchive(j.Name), filepath.Join(JobsDir, j.Name)[1:]); err != nil {
				return fmt.Errorf("job '%s': %w", j.Name, err)
			}
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("release '%s': %w", m.Name, err)
	}

	mt := types.DockerLayer
	if base, err := s.Image.MediaType(); err == nil && base == types.OCIManifestSchema1 {
		mt = types.OCILayer
	}
	var adds []mutate.Addendum
	for _, name := range slices.Sorted(maps.Keys(layers)) {
		l, err := layer.Open(layers[name], mt)
		if err != nil {
			return nil, err
		}
		adds = append(adds, mutate.Addendum{Layer: l, History: v1.History{CreatedBy: "bosh-injector release-image: package " + name}})
	}
	l, err := layer.Open(jobs, mt)
	if err != nil {
		return nil, err
	}
	adds = append(adds, mutate.Addendum{Layer: l, History: v1.History{CreatedBy: "bosh-injector release-image: jobs"}})
	img, err := mutate.Append(s.Image, adds...)
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	if cfg.Config.Labels == nil {
		cfg.Config.Labels = map[string]string{}
	}
	cfg.Config.Labels["org.opencontainers.image.title"] = m.Name
	cfg.Config.Labels["org.opencontainers.image.version"] = m.Version
	cfg.Config.Labels["org.opencontainers.image.revision"] = m.CommitHash
	cfg.Config.Labels["org.opencontainers.image.base.digest"] = s.Digest
	if len(skipped) > 0 {
		cfg.Config.Labels[names.ImageLabelSkippedPackages] = strings.Join(skipped, ",")
	}
	return mutate.ConfigFile(img, cfg)
}

// neededPackages are the packages of the jobs r.Used names (job.MF's
// packages) and their transitive dependencies; nil when r.Used is nil (every
// package is needed). Job specs are unpacked under work.
func neededPackages(r *Release, work string) (map[string]bool, error) {
	if r.Used == nil {
		return nil, nil
	}
	m := r.Manifest
	deps := map[string][]string{}
	for _, p := range slices.Concat(m.Packages, m.CompiledPackages) {
		deps[p.Name] = p.Dependencies
	}
	needed := map[string]bool{}
	var add func(string)
	add = func(name string) {
		if !needed[name] {
			needed[name] = true
			for _, d := range deps[name] {
				add(d)
			}
		}
	}
	for _, job := range slices.Sorted(maps.Keys(r.Used)) {
		if !slices.ContainsFunc(m.Jobs, func(e Entry) bool { return e.Name == job }) {
			return nil, fmt.Errorf("release '%s': the manifest uses job '%s', which release '%s' version '%s' (%s) does not have", m.Name, job, m.Name, m.Version, r.Path)
		}
		dir := filepath.Join(work, job)
		if err := layer.Extract(r.JobArchive(job), "", dir); err != nil {
			return nil, fmt.Errorf("release '%s': job '%s': %w", m.Name, job, err)
		}
		var spec struct {
			Packages []string `yaml:"packages"`
		}
		data, err := os.ReadFile(filepath.Join(dir, "job.MF"))
		if err == nil {
			err = yaml.Unmarshal(data, &spec)
		}
		if err != nil {
			return nil, fmt.Errorf("release '%s': job '%s': job.MF: %w", m.Name, job, err)
		}
		for _, p := range spec.Packages {
			if _, ok := deps[p]; !ok {
				return nil, fmt.Errorf("release '%s': job '%s' needs package '%s', which the release does not have", m.Name, job, p)
			}
			add(p)
		}
	}
	return needed, nil
}
