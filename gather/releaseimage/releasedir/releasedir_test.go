package releasedir

import (
	"archive/tar"
	"compress/gzip"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const fixtures = "../../../test/fixtures/releasedirs"

func TestGlob(t *testing.T) {
	for _, c := range []struct {
		glob string
		yes  []string
		no   []string
	}{
		{"greeter/*.{sh,txt}", []string{"greeter/a.sh", "greeter/b.txt", "greeter/.hidden.sh"}, []string{"greeter/c.md", "greeter/d/e.sh", "greeter/a.shx"}},
		{"extra/**/*.txt", []string{"extra/top.txt", "extra/a/b/deep.txt"}, []string{"extra/a/b/deep.md", "other/top.txt"}},
		{"**/*", []string{"a", "a/b/c"}, nil},
		{"src/{a,b{c,d}}/x", []string{"src/a/x", "src/bc/x", "src/bd/x"}, []string{"src/b/x", "src/bcd/x"}},
		{"a/?.go", []string{"a/b.go"}, []string{"a/bc.go"}},
		{"a/[bc].go", []string{"a/c.go"}, []string{"a/d.go"}},
		{"code.cloudfoundry.org/vendor/golang.org/x/sys/unix/*.go", []string{"code.cloudfoundry.org/vendor/golang.org/x/sys/unix/a.go"}, []string{"code.cloudfoundry.org/vendor/golang.org/x/sys/unix/b/a.go"}},
	} {
		p, err := compile(c.glob)
		if err != nil {
			t.Fatal(err)
		}
		for _, y := range c.yes {
			if !p.match(y) {
				t.Errorf("%s does not match %s", c.glob, y)
			}
		}
		for _, n := range c.no {
			if p.match(n) {
				t.Errorf("%s matches %s", c.glob, n)
			}
		}
	}
	for _, bad := range []string{"a/{b", "a/b}", "a/[b"} {
		if _, err := compile(bad); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

// TestRealFingerprints reads an excerpt of cloudfoundry/nats-release
// v56.26.0: bosh-cli gave its pid_utils package and smoke-tests job these
// fingerprints in releases/nats/nats-56.26.0.yml (the whole checkout's
// twelve jobs and packages matched too, when this reader was written).
func TestRealFingerprints(t *testing.T) {
	r, err := Read(filepath.Join(fixtures, "nats-excerpt"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"package/pid_utils": "07f3634e045adb986ae19ccd952e1fbc7e7a629d6c48487697737781da7de56d",
		"job/smoke-tests":   "d0171675435288c416a6b680c158ae57e29f2ff0c91648581090f8e1039b23b2",
	}
	if got := r.fingerprints(); !maps.Equal(got, want) {
		t.Errorf("fingerprints %v, want %v", got, want)
	}
	if r.Name != "nats" || r.Final || r.Version != "0+dev.1" {
		t.Errorf("release %s version %s final %v, want nats 0+dev.1 (no final releases)", r.Name, r.Version, r.Final)
	}
}

// TestGreeter reads the fixture release directory: globs with {a,b} and
// **, excluded_files, a blob, a vendored package found in another release,
// the version of the final release whose fingerprints it has; and writes
// its archives.
func TestGreeter(t *testing.T) {
	r, err := Read(filepath.Join(fixtures, "greeter"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Name != "greeter" || r.Version != "1" || !r.Final || r.CommitHash != "fixture" {
		t.Errorf("release %s version %s final %v commit %s, want greeter 1, final, fixture", r.Name, r.Version, r.Final, r.CommitHash)
	}
	toolbox, err := Read(filepath.Join(fixtures, "toolbox"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	tools := t.TempDir()
	wt, err := toolbox.Write(tools, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	var asked []string
	written, err := r.Write(out, func(name, fp string) (string, string) {
		asked = append(asked, name+"@"+fp)
		if name == "tools" && fp == toolbox.Packages[0].Fingerprint {
			return filepath.Join(tools, "packages", "tools.tgz"), wt["package/tools"].Digest
		}
		return "", ""
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(asked) != 1 {
		t.Errorf("vendored lookups %v, want tools once", asked)
	}
	if written["package/tools"] != wt["package/tools"] {
		t.Errorf("vendored tools %v, want toolbox's %v", written["package/tools"], wt["package/tools"])
	}
	for archive, want := range map[string][]string{
		"packages/greeter.tgz": {"./packaging 644", "./greeter/greet.sh 755", "./greeter/names.txt 644", "./greeting/hello.txt 644"},
		"packages/extra.tgz":   {"./packaging 644", "./extra/a/b/deep.txt 644", "./extra/top.txt 644"},
		"packages/tools.tgz":   {"./packaging 644", "./tools/tool.sh 755"},
		"jobs/hello.tgz":       {"./job.MF 644", "./monit 644", "./templates/run.sh.erb 644"},
		"jobs/unused.tgz":      {"./job.MF 644", "./monit 644"},
	} {
		got := members(t, filepath.Join(out, archive))
		if !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))) {
			t.Errorf("%s holds %v, want %v", archive, got, want)
		}
	}
	// Written twice, the archives are the same.
	again, err := r.Write(t.TempDir(), func(string, string) (string, string) {
		return filepath.Join(tools, "packages", "tools.tgz"), wt["package/tools"].Digest
	})
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(again, written) {
		t.Errorf("second write %v, first %v", again, written)
	}
}

// members lists an archive's regular files with their modes.
func members(t *testing.T, archive string) []string {
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	var out []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			out = append(out, fmt.Sprintf("%s %o", h.Name, h.Mode))
		}
	}
}

// copyDir copies a fixture release directory for a test to change.
func copyDir(t *testing.T, name string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), name)
	if err := os.CopyFS(dst, os.DirFS(filepath.Join(fixtures, name))); err != nil {
		t.Fatal(err)
	}
	return dst
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestDevVersion: a changed file makes the release a dev version after
// the latest final one, and changes only its package's fingerprint.
func TestDevVersion(t *testing.T) {
	dir := copyDir(t, "greeter")
	write(t, filepath.Join(dir, "src", "extra", "top.txt"), "changed\n")
	r, err := Read(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Version != "1+dev.1" || r.Final {
		t.Errorf("version %s final %v, want 1+dev.1", r.Version, r.Final)
	}
	got := r.fingerprints()
	if got["package/greeter"] != "e1e36dff03c9f008516215dbfcb628746c8c52e0ff85a0a2d76c57f82e1961d9" || got["package/extra"] == "84b8854b4ce6fb463376381daa460e6698cfc944a0d6686deedce9e8c538e2f6" {
		t.Errorf("fingerprints %v: only extra's should change", got)
	}
}

// TestStandIn: a directory standing in for a vendored package gives its
// files and a fingerprint of its own, never the spec.lock's.
func TestStandIn(t *testing.T) {
	standIn := t.TempDir()
	write(t, filepath.Join(standIn, "packaging"), "echo stand-in\n")
	r, err := Read(filepath.Join(fixtures, "greeter"), Options{StandIns: map[string]string{"tools": standIn}})
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(r.Packages, func(p Package) bool { return p.Name == "tools" })
	if p := r.Packages[i]; p.StandIn != standIn || p.Fingerprint == "63d5a418b676cc5fff70097189c9be98fcb9292a79bf07eb468cc3a34d631738" {
		t.Errorf("tools %+v: want the stand-in with its own fingerprint", p)
	}
	if r.Final {
		t.Error("a release with a stand-in is final")
	}
	out := t.TempDir()
	if _, err := r.Write(out, nil); err != nil {
		t.Fatal(err)
	}
	if got := members(t, filepath.Join(out, "packages", "tools.tgz")); !slices.Equal(got, []string{"./packaging 644"}) {
		t.Errorf("stand-in archive %v", got)
	}
}

// TestBadDirectories: each mistake is an error naming the file, package or
// blob and what to do.
func TestBadDirectories(t *testing.T) {
	for _, c := range []struct {
		name   string
		break_ func(dir string)
		want   string
	}{
		{"blob missing, digest unknown", func(dir string) {
			os.Remove(filepath.Join(dir, "blobs", "greeting", "hello.txt"))
			write(t, filepath.Join(dir, "config", "blobs.yml"), "greeting/hello.txt:\n  size: 18\n  sha: 0123456789abcdef0123456789abcdef01234567\n")
		}, "package 'greeter': spec files: blob 'greeting/hello.txt' (config/blobs.yml, 18 bytes) is in neither blobs/ nor .blobs/: download it with `bosh sync-blobs`"},
		{"packaging through files", func(dir string) {
			write(t, filepath.Join(dir, "src", "packaging"), "x")
			write(t, filepath.Join(dir, "packages", "extra", "spec"), "name: extra\nfiles:\n- packaging\n")
		}, "the special file 'packaging' must not be included through files"},
		{"pre_packaging", func(dir string) { write(t, filepath.Join(dir, "packages", "extra", "pre_packaging"), "x") }, "package 'extra': pre_packaging scripts are not run"},
		{"job name", func(dir string) { write(t, filepath.Join(dir, "jobs", "unused", "spec"), "name: other\n") }, "job 'unused': job directory 'unused' does not match job name 'other' in spec"},
		{"no name", func(dir string) { os.Remove(filepath.Join(dir, "config", "final.yml")) }, "no release name: config/final.yml has no name"},
		{"bad spec", func(dir string) { write(t, filepath.Join(dir, "packages", "extra", "spec"), "name: [\n") }, "packages/extra/spec: yaml"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := copyDir(t, "greeter")
			c.break_(dir)
			_, err := Read(dir, Options{})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want %q", err, c.want)
			}
		})
	}
}

// TestMissingFiles: a package whose blob nobody downloaded, or a vendored
// package found nowhere, keeps its fingerprint (the blob's from
// config/blobs.yml) and has no archive, saying why and what to do: only
// building it fails (a deployment may not need it).
func TestMissingFiles(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	dir := copyDir(t, "greeter")
	os.Remove(filepath.Join(dir, "blobs", "greeting", "hello.txt"))
	os.RemoveAll(filepath.Join(dir, "src", "extra"))
	r, err := Read(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if fp := r.fingerprints()["package/greeter"]; fp != "e1e36dff03c9f008516215dbfcb628746c8c52e0ff85a0a2d76c57f82e1961d9" {
		t.Errorf("without its blob, greeter's fingerprint is %s: want the same", fp)
	}
	out := t.TempDir()
	written, err := r.Write(out, nil)
	if err != nil {
		t.Fatal(err)
	}
	for pkg, want := range map[string]string{
		"greeter": "spec files: blob 'greeting/hello.txt' (config/blobs.yml, 18 bytes) is in neither blobs/ nor .blobs/: download it with `bosh sync-blobs`",
		"extra":   "spec files: missing files for pattern 'extra/**/*.txt' (in src/ and blobs/; a git submodule not checked out?",
		"tools":   "it is vendored (packages/tools/spec.lock, fingerprint 63d5a418b676cc5fff70097189c9be98fcb9292a79bf07eb468cc3a34d631738) and its files are not here: give the release it comes from too",
	} {
		if w := written["package/"+pkg]; !strings.Contains(w.Missing, want) || w.Digest != "" {
			t.Errorf("%s: %+v, want missing %q", pkg, w, want)
		}
		if _, err := os.Stat(filepath.Join(out, "packages", pkg+".tgz")); err == nil {
			t.Errorf("%s has an archive", pkg)
		}
	}
	if w := written["job/hello"]; w.Missing != "" || w.Digest == "" {
		t.Errorf("job hello: %+v", w)
	}
}

// TestBoshCache: a vendored package bosh-cli downloaded before is taken
// from its cache, by the digest the release's final builds index gives.
func TestBoshCache(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	dir := copyDir(t, "greeter")
	write(t, filepath.Join(dir, ".final_builds", "packages", "tools", "index.yml"),
		"builds:\n  63d5a418b676cc5fff70097189c9be98fcb9292a79bf07eb468cc3a34d631738:\n    version: 63d5\n    blobstore_id: x\n    sha1: sha256:abc\n")
	write(t, filepath.Join(home, ".bosh", "cache", "sha256:abc"), "an archive")
	r, err := Read(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	written, err := r.Write(out, nil)
	if err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(filepath.Join(out, "packages", "tools.tgz")); string(data) != "an archive" || written["package/tools"].Digest != "sha256:abc" {
		t.Errorf("tools from the cache: %q %v", data, written["package/tools"])
	}
}
