package releaseimage_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/bosh-injector/bosh-injector/gather/releaseimage"
	"github.com/bosh-injector/bosh-injector/gather/releaseimage/compile"
	"github.com/bosh-injector/bosh-injector/test/fixtures"
	"github.com/bosh-injector/bosh-injector/test/registry"
)

// base is the image `make base-image` imports; it stands in for the
// stemcell.
const base = "docker.io/library/debian:bookworm-slim"

// env is what every test here shares: a registry holding the stemcell
// image, and the fixture releases' source tarballs.
var env struct {
	registry *registry.Registry
	stemcell string
	tarballs []string
	dir      string
	// cache is the compiled package cache the tests share.
	cache string
	// data is the compilation VM's data disk: the fixture images' builds',
	// kept across runs, whose Go build cache compiles the standard library
	// once, as a reused compilation VM does. The package caches stay the
	// tests' own: every compile they count runs.
	data string
}

func TestMain(m *testing.M) {
	code, err := run(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(code)
}

func run(m *testing.M) (int, error) {
	fixtures.PodmanEnv()
	dir, err := os.MkdirTemp("", "releaseimage-test-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	env.dir, env.cache = dir, filepath.Join(dir, "cache")
	shared, err := fixtures.CompiledPackages()
	if err != nil {
		return 0, err
	}
	env.data = releaseimage.CompileData(shared)
	if err := os.MkdirAll(filepath.Join(dir, "registry"), 0o755); err != nil {
		return 0, err
	}
	env.registry, err = registry.Start(filepath.Join(dir, "registry"))
	if err != nil {
		return 0, err
	}
	defer env.registry.Stop()
	env.stemcell = env.registry.Addr + "/stemcell:bookworm"
	if err := fixtures.PushImage(context.Background(), base, env.stemcell); err != nil {
		return 0, fmt.Errorf("pushing the stemcell image (run `make base-image`): %w", err)
	}
	for _, r := range fixtures.Releases {
		t, err := fixtures.SourceTarball(dir, r)
		if err != nil {
			return 0, err
		}
		env.tarballs = append(env.tarballs, t)
	}
	return m.Run(), nil
}

// counting counts the packages an engine compiles.
type counting struct {
	compile.Engine
	calls atomic.Int32
}

func (c *counting) Compile(ctx context.Context, t compile.Task) error {
	c.calls.Add(1)
	return c.Engine.Compile(ctx, t)
}

func config(t testing.TB, cache string, tarballs ...string) (releaseimage.Config, *counting) {
	engine := &counting{Engine: compile.Podman{Insecure: true, Data: env.data}}
	var log logr.Logger
	if tt, ok := t.(*testing.T); ok {
		log = testr.New(tt)
	} else {
		log = logr.Discard()
	}
	return releaseimage.Config{
		Tarballs: tarballs, Repository: env.registry.Addr + "/fixtures",
		StemcellImage: env.stemcell, StemcellOS: fixtures.StemcellOS, StemcellVersion: fixtures.StemcellVersion,
		Jobs: 2, CacheDir: cache, Engine: engine, Log: log,
	}, engine
}

// TestFixtureReleases builds the fixture releases from source and
// pushes them, then again with the warm cache: nothing compiles and the
// digests are the same. The images hold the layout the copy and gathering
// containers read, and the compiled programs run.
func TestFixtureReleases(t *testing.T) {
	ctx := context.Background()
	cache := env.cache
	cacheRepo := env.registry.Addr + "/compiled-packages"
	cfg, engine := config(t, cache, env.tarballs...)
	cfg.Push, cfg.CacheRepository = true, cacheRepo
	cold, err := releaseimage.Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	// golang and printconfig are vendored by every release, compiled once;
	// then bus, pgstore, storefront, smoke-tests and lifecycled.
	if n := engine.calls.Load(); n != 7 {
		t.Errorf("cold build compiled %d packages, want 7", n)
	}
	for i, r := range cold {
		if want := fixtures.Image(env.registry.Addr+"/fixtures", fixtures.Releases[i]); r.Tag != want {
			t.Errorf("image %s, want %s (the manifest's naming rule)", r.Tag, want)
		}
	}

	cfg, engine = config(t, cache, env.tarballs...)
	warm, err := releaseimage.Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if n := engine.calls.Load(); n != 0 {
		t.Errorf("warm rebuild compiled %d packages, want 0", n)
	}
	for i := range cold {
		if warm[i].Digest != cold[i].Digest {
			t.Errorf("%s: digest %s, then %s", cold[i].Release, cold[i].Digest, warm[i].Digest)
		}
	}

	// The jobs are laid out as before: job.MF (the spec), monit, templates.
	files := imageFiles(t, pull(t, cold[2].Ref()))
	var jobs []string
	for f := range files {
		if strings.HasPrefix(f, "var/vcap/jobs-src/") {
			jobs = append(jobs, f)
		}
	}
	slices.Sort(jobs)
	want := []string{
		"var/vcap/jobs-src/smoke-tests/job.MF", "var/vcap/jobs-src/smoke-tests/monit",
		"var/vcap/jobs-src/smoke-tests/templates/bpm.yml.erb", "var/vcap/jobs-src/smoke-tests/templates/config.json.erb",
		"var/vcap/jobs-src/smoke-tests/templates/run.sh.erb",
		"var/vcap/jobs-src/storefront/job.MF", "var/vcap/jobs-src/storefront/monit",
		"var/vcap/jobs-src/storefront/templates/bpm.yml.erb", "var/vcap/jobs-src/storefront/templates/storefront.yml.erb",
		"var/vcap/jobs-src/web-check/job.MF", "var/vcap/jobs-src/web-check/monit",
		"var/vcap/jobs-src/web-check/templates/bpm.yml.erb", "var/vcap/jobs-src/web-check/templates/run.sh.erb",
	}
	if !slices.Equal(jobs, want) {
		t.Errorf("shop's jobs-src:\n%s\nwant\n%s", strings.Join(jobs, "\n"), strings.Join(want, "\n"))
	}
	spec, _ := os.ReadFile(filepath.Join(fixtures.ReleaseDir("shop"), "jobs", "storefront", "spec"))
	if got := files["var/vcap/jobs-src/storefront/job.MF"]; got != string(spec) {
		t.Errorf("storefront's job.MF is not its spec:\n%s", got)
	}
	for _, p := range []string{"golang/bin/go", "golang/bosh/compile.env", "printconfig/bin/printconfig", "storefront/bin/storefront", "smoke-tests/bin/smoke-tests"} {
		if _, ok := files["var/vcap/packages/"+p]; !ok {
			t.Errorf("shop's image has no /var/vcap/packages/%s", p)
		}
	}

	// podman pulls the image from the registry and the compiled program runs.
	runs(t, cold[0].Ref(), "bus")
	t.Cleanup(func() {
		for _, r := range cold {
			_ = exec.Command("podman", "rmi", "-f", r.Ref()).Run()
		}
	})

	t.Run("a second machine shares the compiled packages through the registry", func(t *testing.T) {
		// Another machine: an empty disk cache, the same --cache-repository.
		empty := t.TempDir()
		cfg, engine := config(t, empty, env.tarballs...)
		cfg.CacheRepository = cacheRepo
		res, err := releaseimage.Run(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if n := engine.calls.Load(); n != 0 {
			t.Errorf("compiled %d packages with the registry cache warm", n)
		}
		for i := range cold {
			if res[i].Digest != cold[i].Digest {
				t.Errorf("%s: digest %s, on the first machine %s", cold[i].Release, res[i].Digest, cold[i].Digest)
			}
		}
		fetched, _ := filepath.Glob(filepath.Join(empty, "*.tar.gz"))
		if len(fetched) != 7 {
			t.Errorf("the disk cache holds %d packages fetched from the registry, want 7", len(fetched))
		}
	})

	t.Run("manifest", func(t *testing.T) {
		// bus comes from its url, a local file; the stemcell from the manifest.
		shop, err := fixtures.ShopManifest()
		if err != nil {
			t.Fatal(err)
		}
		from := "- name: bus\n  version: \"1.0.0\"\n  url: " + fixtures.ReleaseURL
		if !bytes.Contains(shop, []byte(from)) {
			t.Fatalf("shop.yml has no %q", from)
		}
		cfg, engine := config(t, cache, env.tarballs[1:]...)
		cfg.Manifest = bytes.Replace(shop, []byte(from), []byte("- name: bus\n  version: \"1.0.0\"\n  url: file://"+env.tarballs[0]), 1)
		cfg.StemcellOS, cfg.StemcellVersion = "", ""
		res, err := releaseimage.Run(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if n := engine.calls.Load(); n != 0 {
			t.Errorf("compiled %d packages with a warm cache", n)
		}
		ops, err := releaseimage.OpsFile(res)
		if err != nil {
			t.Fatal(err)
		}
		var want strings.Builder
		for _, r := range cold {
			if !bytes.Contains(shop, []byte("- name: "+r.Release+"\n")) {
				continue // a fixture release the shop deployment does not use
			}
			fmt.Fprintf(&want, "- type: replace\n  path: /releases/name=%s/image?\n  value: %s\n", r.Release, r.Ref())
		}
		if string(ops) != want.String() {
			t.Errorf("ops file:\n%s\nwant\n%s", ops, want.String())
		}
	})

	t.Run("compiled release", func(t *testing.T) {
		// As `bosh export-release` would: the packages compiled above.
		type archive struct {
			buf bytes.Buffer
			gz  *gzip.Writer
			tw  *tar.Writer
		}
		archives := map[string]*archive{}
		source := imageFiles(t, pull(t, cold[1].Ref()))
		for f, data := range source {
			rest, ok := strings.CutPrefix(f, "var/vcap/packages/")
			if !ok {
				continue
			}
			pkg, path, _ := strings.Cut(rest, "/")
			a := archives[pkg]
			if a == nil {
				a = &archive{}
				a.gz, _ = gzip.NewWriterLevel(&a.buf, gzip.BestSpeed)
				a.tw = tar.NewWriter(a.gz)
				archives[pkg] = a
			}
			if err := a.tw.WriteHeader(&tar.Header{Name: "./" + path, Mode: 0o755, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
				t.Fatal(err)
			}
			_, _ = a.tw.Write([]byte(data))
		}
		compiled := map[string][]byte{}
		for pkg, a := range archives {
			if err := errors.Join(a.tw.Close(), a.gz.Close()); err != nil {
				t.Fatal(err)
			}
			compiled[pkg] = a.buf.Bytes()
		}
		tarball, err := fixtures.CompiledTarball(t.TempDir(), env.tarballs[1], compiled)
		if err != nil {
			t.Fatal(err)
		}
		ociDir := t.TempDir()
		cfg, engine := config(t, t.TempDir(), tarball)
		cfg.OCILayout, cfg.Load = ociDir, true
		res, err := releaseimage.Run(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = exec.Command("podman", "rmi", "-f", res[0].Tag).Run() })
		if out, err := exec.Command("podman", "image", "inspect", "--format", "{{.Digest}}", res[0].Tag).CombinedOutput(); err != nil {
			t.Errorf("--load: %v: %s", err, out)
		}
		if n := engine.calls.Load(); n != 0 {
			t.Errorf("a compiled release compiled %d packages", n)
		}
		if _, err := os.Stat(filepath.Join(ociDir, "index.json")); err != nil {
			t.Errorf("no OCI layout: %v", err)
		}
		if res[0].Tag != cold[1].Tag {
			t.Errorf("compiled release image %s, want %s", res[0].Tag, cold[1].Tag)
		}

		// It holds the same jobs and packages (every file under /var/vcap)
		// as the image built from source, and podman runs its program from
		// the loaded image.
		idx, err := layout.ImageIndexFromPath(ociDir)
		if err != nil {
			t.Fatal(err)
		}
		h, err := v1.NewHash(res[0].Digest)
		if err != nil {
			t.Fatal(err)
		}
		img, err := idx.Image(h)
		if err != nil {
			t.Fatal(err)
		}
		got := imageFiles(t, img)
		var differ []string
		for f, data := range source {
			if g, ok := got[f]; !ok || g != data {
				differ = append(differ, f)
			}
		}
		for f := range got {
			if _, ok := source[f]; !ok {
				differ = append(differ, f)
			}
		}
		t.Logf("%d files under /var/vcap compared with the source-built image's", len(source))
		if len(differ) > 0 {
			slices.Sort(differ)
			t.Errorf("%d files differ from the source-built image's, first %v", len(differ), differ[:min(len(differ), 10)])
		}
		for _, dir := range []string{"var/vcap/jobs-src/pgstore/", "var/vcap/packages/pgstore/"} {
			if !slices.ContainsFunc(slices.Collect(maps.Keys(got)), func(f string) bool { return strings.HasPrefix(f, dir) }) {
				t.Errorf("the compiled release's image has nothing under %s", dir)
			}
		}
		runs(t, res[0].Tag, "pgstore", "--pull=never")
	})
}

// runs checks that podman runs package pkg's program (printconfig under
// the job's name) in image, on the job's monit file; it exits once it
// printed it, as an errand's does.
func runs(t *testing.T, image, pkg string, flags ...string) {
	t.Helper()
	args := append([]string{"run", "--rm", "--tls-verify=false", "--network=none", "--env", "PRINTCONFIG_EXIT=0"}, flags...)
	args = append(args, image, fmt.Sprintf("/var/vcap/packages/%[1]s/bin/%[1]s", pkg), fmt.Sprintf("/var/vcap/jobs-src/%s/monit", pkg))
	out, err := exec.Command("podman", args...).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "==> /var/vcap/jobs-src/"+pkg+"/monit <==") {
		t.Errorf("running %s in its image: %v: %s", pkg, err, out)
	}
}

// pull is image ref from the registry.
func pull(t *testing.T, ref string) v1.Image {
	t.Helper()
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	img, err := remote.Image(r)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// imageFiles is every regular file of img with its content, for the files
// under /var/vcap.
func imageFiles(t *testing.T, img v1.Image) map[string]string {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	files := map[string]string{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg && strings.HasPrefix(h.Name, "var/vcap/") {
			data, _ := io.ReadAll(tr)
			files[h.Name] = string(data)
		}
	}
}

// copyRelease copies fixture release name for a test to break.
func copyRelease(t *testing.T, name string) string {
	dst := filepath.Join(t.TempDir(), name)
	if out, err := exec.Command("cp", "-r", fixtures.ReleaseDir(name), dst).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	return dst
}

func write(t *testing.T, path, content string) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestBadReleases: each broken release is a clear error naming what is
// wrong, and nothing is pushed.
func TestBadReleases(t *testing.T) {
	cases := []struct {
		name  string
		make  func(t *testing.T) string
		wants []string
	}{{
		name: "corrupted tarball",
		make: func(t *testing.T) string {
			data, _ := os.ReadFile(env.tarballs[0])
			p := filepath.Join(t.TempDir(), "bus-1.0.0.tgz")
			write(t, p, string(data[:len(data)/2]))
			return p
		},
		wants: []string{"release tarball", "bus-1.0.0.tgz", "unexpected EOF"},
	}, {
		name: "sha1 mismatch",
		make: func(t *testing.T) string {
			p := filepath.Join(t.TempDir(), "bus-1.0.0.tgz")
			data, _ := os.ReadFile(env.tarballs[0])
			write(t, p, string(data))
			err := fixtures.EditTarball(p, func(name string, data []byte) []byte {
				if name == "packages/bus.tgz" {
					return append(data, 0)
				}
				return data
			})
			if err != nil {
				t.Fatal(err)
			}
			return p
		},
		wants: []string{"release 'bus'", "packages/bus.tgz", "sha1 mismatch"},
	}, {
		name: "sha256 mismatch",
		make: func(t *testing.T) string {
			p := filepath.Join(t.TempDir(), "bus-1.0.0.tgz")
			data, _ := os.ReadFile(env.tarballs[0])
			write(t, p, string(data))
			err := fixtures.EditTarball(p, func(name string, data []byte) []byte {
				if name == "release.MF" {
					return regexp.MustCompile(`sha256:[0-9a-f]{8}`).ReplaceAll(data, []byte("sha256:00000000"))
				}
				return data
			})
			if err != nil {
				t.Fatal(err)
			}
			return p
		},
		wants: []string{"release 'bus'", "jobs/bus.tgz", "sha256 mismatch"},
	}, {
		name: "dependency cycle",
		make: func(t *testing.T) string {
			rel := copyRelease(t, "bus")
			write(t, filepath.Join(rel, "packages", "bus", "spec"), "name: bus\ndependencies: [printconfig, loop]\n")
			write(t, filepath.Join(rel, "packages", "loop", "spec"), "name: loop\ndependencies: [bus]\n")
			write(t, filepath.Join(rel, "packages", "loop", "packaging"), "true\n")
			p, err := fixtures.SourceTarballFrom(t.TempDir(), "bus", rel)
			if err != nil {
				t.Fatal(err)
			}
			return p
		},
		wants: []string{"release 'bus'", "cycle: bus -> loop -> bus"},
	}, {
		name: "missing dependency",
		make: func(t *testing.T) string {
			rel := copyRelease(t, "bus")
			write(t, filepath.Join(rel, "packages", "bus", "spec"), "name: bus\ndependencies: [printconfig, libnope]\n")
			p, err := fixtures.SourceTarballFrom(t.TempDir(), "bus", rel)
			if err != nil {
				t.Fatal(err)
			}
			return p
		},
		wants: []string{"release 'bus'", "package 'bus' depends on 'libnope'"},
	}, {
		name: "failing packaging script",
		make: func(t *testing.T) string {
			rel := copyRelease(t, "bus")
			write(t, filepath.Join(rel, "packages", "bus", "spec"), "name: bus\n")
			write(t, filepath.Join(rel, "packages", "bus", "packaging"), "echo configuring bus\necho 'bus.c:1: error: doomed' >&2\nexit 3\n")
			p, err := fixtures.SourceTarballFrom(t.TempDir(), "bus", rel)
			if err != nil {
				t.Fatal(err)
			}
			return p
		},
		wants: []string{"release 'bus'", "package 'bus'", "exited with code 3", "bus.c:1: error: doomed"},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, _ := config(t, env.cache, c.make(t))
			cfg.Repository = env.registry.Addr + "/bad-" + strings.ReplaceAll(c.name, " ", "-")
			cfg.Push = true
			_, err := releaseimage.Run(context.Background(), cfg)
			if err == nil {
				t.Fatal("built")
			}
			for _, w := range c.wants {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			ref, _ := name.ParseReference(cfg.Repository + "/bus:" + fixtures.StemcellOS + "-" + fixtures.StemcellVersion + "-" + fixtures.Version)
			if _, err := remote.Head(ref); err == nil {
				t.Errorf("%s was pushed", ref)
			}
		})
	}
}

// A mixed release, a source package depending on a package shipped
// compiled, is refused with what to do, before anything is built.
func TestMixedRelease(t *testing.T) {
	r := &releaseimage.Release{Manifest: releaseimage.Manifest{Name: "bus", Version: fixtures.Version,
		Packages:         []releaseimage.Entry{{Name: "bus", Dependencies: []string{"printconfig"}}},
		CompiledPackages: []releaseimage.Entry{{Name: "printconfig", Stemcell: fixtures.StemcellOS + "/" + fixtures.StemcellVersion}},
	}}
	s := releaseimage.Stemcell{OS: fixtures.StemcellOS, Version: fixtures.StemcellVersion}
	_, err := releaseimage.Build(context.Background(), r, s, nil, t.TempDir())
	want := "release 'bus': source package 'bus' depends on 'printconfig', which the tarball holds compiled"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("error %v, want %q", err, want)
	}
}

// TestLocalStemcell builds on a stemcell image only on this machine: in
// podman's storage, and saved as an OCI layout. Packages are cached by the
// stemcell's image ID, so what the registry stemcell compiled serves both,
// and both give the same image, which podman pulls and runs.
func TestLocalStemcell(t *testing.T) {
	ctx := context.Background()
	cfg, _ := config(t, env.cache, env.tarballs[0])
	if _, err := releaseimage.Run(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	layoutDir := filepath.Join(t.TempDir(), "stemcell")
	if out, err := exec.Command("podman", "image", "save", "-q", "--format", "oci-dir", "-o", layoutDir, base).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	var digests []string
	parent := t
	for _, stemcell := range []string{releaseimage.TransportStorage + base, releaseimage.TransportOCI + layoutDir, releaseimage.TransportOCI + layoutDir + ":" + base} {
		t.Run(stemcell, func(t *testing.T) {
			cfg, engine := config(t, env.cache, env.tarballs[0])
			cfg.StemcellImage, cfg.Repository, cfg.Push = stemcell, env.registry.Addr+"/local-stemcell", true
			res, err := releaseimage.Run(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if n := engine.calls.Load(); n != 0 {
				t.Errorf("compiled %d packages the registry stemcell's build cached", n)
			}
			digests = append(digests, res[0].Digest)
			// The same image again is already here; another is pulled.
			runs(t, res[0].Ref(), "bus")
			parent.Cleanup(func() { _ = exec.Command("podman", "rmi", "-f", res[0].Ref()).Run() })
		})
	}
	if len(digests) == 3 && (digests[0] != digests[1] || digests[1] != digests[2]) {
		t.Errorf("digests differ by where the stemcell came from: %v", digests)
	}

	t.Run("an OCI layout without the named image", func(t *testing.T) {
		cfg, _ := config(t, env.cache, env.tarballs[0])
		cfg.StemcellImage = releaseimage.TransportOCI + layoutDir + ":nope"
		_, err := releaseimage.Run(ctx, cfg)
		if err == nil || !strings.Contains(err.Error(), `0 images match "nope"`) || !strings.Contains(err.Error(), base) {
			t.Errorf("error %v, want one listing the layout's images", err)
		}
	})
}

// TestOpenEndsWithContext: an extraction whose context ended (SIGTERM)
// stops, writing nothing.
func TestOpenEndsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	work := t.TempDir()
	if _, err := releaseimage.Open(ctx, env.tarballs[0], work); !errors.Is(err, context.Canceled) {
		t.Errorf("error %v, want the context's", err)
	}
	if entries, _ := os.ReadDir(work); len(entries) > 0 {
		t.Errorf("%d entries written", len(entries))
	}
}
