package releaseimage

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"gopkg.in/yaml.v3"

	"github.com/bosh-injector/bosh-injector/gather/names"
	"github.com/bosh-injector/bosh-injector/gather/releaseimage/compile"
)

const releaseDirs = "../../test/fixtures/releasedirs"

// recording compiles by writing the package's name into its install
// directory, and records what it compiled.
type recording struct {
	mu    sync.Mutex
	names []string
}

func (e *recording) Compile(_ context.Context, t compile.Task) error {
	e.mu.Lock()
	e.names = append(e.names, t.Name)
	e.mu.Unlock()
	return os.WriteFile(filepath.Join(t.Install, "compiled"), []byte(t.Name), 0o644)
}

func fakeBuild(t *testing.T, r *Release) (string, []string, map[string]string) {
	t.Helper()
	e := &recording{}
	c := &compile.Compiler{Engine: e, Stemcell: "stemcell", StemcellID: "sha256:stemcell", CacheDir: t.TempDir(), Jobs: 1, Log: logr.Discard()}
	img, err := Build(context.Background(), r, Stemcell{Image: empty.Image, OS: "ubuntu-noble", Version: "1.0"}, c, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(e.names)
	return d.String(), e.names, cf.Config.Labels
}

// TestDirectoryIsItsTarball: a release directory becomes the release its
// tarball would be: packed as `bosh create-release --tarball` packs it and
// opened, the same release.MF and the same image.
func TestDirectoryIsItsTarball(t *testing.T) {
	rs, err := openDirs([]string{filepath.Join(releaseDirs, "greeter"), filepath.Join(releaseDirs, "toolbox")}, nil, nil, t.TempDir(), logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	// Vendoring nothing, toolbox is read first, so greeter finds its tools.
	if rs[0].Manifest.Name != "toolbox" || rs[1].Manifest.Name != "greeter" {
		t.Fatalf("releases %s, %s", rs[0].Manifest.Name, rs[1].Manifest.Name)
	}
	dir := rs[1]
	tarball := packTarball(t, dir)
	work := t.TempDir()
	opened, err := Open(context.Background(), tarball, work)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(opened.Manifest, dir.Manifest) {
		t.Errorf("tarball's release.MF %+v\ndirectory's %+v", opened.Manifest, dir.Manifest)
	}
	fromDir, compiled, _ := fakeBuild(t, dir)
	fromTarball, _, _ := fakeBuild(t, opened)
	if fromDir != fromTarball {
		t.Errorf("image from the directory %s, from its tarball %s", fromDir, fromTarball)
	}
	if want := []string{"extra", "greeter", "tools"}; !slices.Equal(compiled, want) {
		t.Errorf("compiled %v, want %v", compiled, want)
	}
}

// TestManifestCompilesWhatJobsNeed: for a deployment, only the packages of
// the jobs it uses and their dependencies are compiled, as a director
// compiles them; the image says which it skipped.
func TestManifestCompilesWhatJobsNeed(t *testing.T) {
	rs, err := openDirs([]string{filepath.Join(releaseDirs, "greeter"), filepath.Join(releaseDirs, "toolbox")}, nil, nil, t.TempDir(), logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	greeter := rs[1]
	greeter.Used = map[string]bool{"hello": true}
	_, compiled, labels := fakeBuild(t, greeter)
	if want := []string{"greeter", "tools"}; !slices.Equal(compiled, want) {
		t.Errorf("compiled %v, want %v (hello's greeter and its dependency)", compiled, want)
	}
	if got := labels[names.ImageLabelSkippedPackages]; got != "extra" {
		t.Errorf("label %s=%q, want extra", names.ImageLabelSkippedPackages, got)
	}
	greeter.Used = map[string]bool{"nope": true}
	_, err = Build(context.Background(), greeter, Stemcell{Image: empty.Image}, nil, t.TempDir())
	if want := "the manifest uses job 'nope', which release 'greeter' version '1'"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("error %v, want %q", err, want)
	}
}

// packTarball packs r as a release tarball: release.MF and its archives.
func packTarball(t *testing.T, r *Release) string {
	t.Helper()
	mf, err := yaml.Marshal(r.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "release.tgz")
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	gz := gzip.NewWriter(f)
	tw := tar.NewWriter(gz)
	add := func(name string, data []byte) {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "./" + name, Mode: 0o644, Size: int64(len(data))}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(data); err != nil {
			t.Fatal(err)
		}
	}
	add("release.MF", mf)
	for _, j := range r.Manifest.Jobs {
		data, _ := os.ReadFile(r.JobArchive(j.Name))
		add("jobs/"+j.Name+".tgz", data)
	}
	for _, p := range r.Manifest.Packages {
		data, _ := os.ReadFile(r.PackageArchive(p.Name))
		add("packages/"+p.Name+".tgz", data)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return out
}
