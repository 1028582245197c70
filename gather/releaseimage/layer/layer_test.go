package layer

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The same files give the same layer bytes whatever their times, and a
// layer unpacks back into them.
func TestReproducibleRoundTrip(t *testing.T) {
	src := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(src, "bin"), 0o755))
	must(os.WriteFile(filepath.Join(src, "bin", "app"), []byte("#!/bin/sh\n"), 0o755))
	must(os.WriteFile(filepath.Join(src, "README"), []byte("hi\n"), 0o644))
	must(os.Symlink("bin/app", filepath.Join(src, "app")))

	write := func(name string) []byte {
		p := filepath.Join(t.TempDir(), name)
		must(Write(p, func(w *Writer) error { return w.AddDir(src, "var/vcap/packages/app") }))
		data, err := os.ReadFile(p)
		must(err)
		return data
	}
	first := write("a.tar.gz")
	must(os.Chtimes(filepath.Join(src, "README"), time.Now(), time.Now().Add(time.Hour)))
	if !bytes.Equal(first, write("b.tar.gz")) {
		t.Error("the same files gave different layers")
	}

	p := filepath.Join(t.TempDir(), "l.tar.gz")
	must(os.WriteFile(p, first, 0o644))
	dst := t.TempDir()
	must(Extract(p, "var/vcap/packages/app", dst))
	if data, err := os.ReadFile(filepath.Join(dst, "bin", "app")); err != nil || string(data) != "#!/bin/sh\n" {
		t.Errorf("bin/app: %q %v", data, err)
	}
	if info, err := os.Stat(filepath.Join(dst, "bin", "app")); err != nil || info.Mode().Perm() != 0o755 {
		t.Errorf("bin/app mode: %v %v", info, err)
	}
	if l, err := os.Readlink(filepath.Join(dst, "app")); err != nil || l != "bin/app" {
		t.Errorf("app link: %q %v", l, err)
	}
}

func TestWriteFailureLeavesNothing(t *testing.T) {
	p := filepath.Join(t.TempDir(), "l.tar.gz")
	if err := Write(p, func(w *Writer) error { return w.AddDir("/does/not/exist", "x") }); err == nil {
		t.Fatal("no error")
	}
	if entries, _ := os.ReadDir(filepath.Dir(p)); len(entries) != 0 {
		t.Errorf("left %v", entries)
	}
}

// A crafted archive cannot write outside the destination: not through a
// symlink it ships (absolute or relative), nor through "..".
func TestExtractStaysInside(t *testing.T) {
	// Every case's outside is a directory named outside next to dst.
	outside := filepath.Join(t.TempDir(), "outside")
	for _, tc := range []struct {
		name    string
		members []tar.Header
		member  string // named in the error
	}{
		{"absolute symlink", []tar.Header{
			{Typeflag: tar.TypeSymlink, Name: "x", Linkname: outside},
			{Typeflag: tar.TypeReg, Name: "x/evil", Size: 4, Mode: 0o644},
		}, "x/evil"},
		{"relative symlink", []tar.Header{
			{Typeflag: tar.TypeDir, Name: "d/", Mode: 0o755},
			{Typeflag: tar.TypeSymlink, Name: "d/up", Linkname: "../../outside"},
			{Typeflag: tar.TypeReg, Name: "d/up/evil", Size: 4, Mode: 0o644},
		}, "d/up/evil"},
		{"directory through a symlink", []tar.Header{
			{Typeflag: tar.TypeSymlink, Name: "x", Linkname: outside},
			{Typeflag: tar.TypeDir, Name: "x/evil/", Mode: 0o755},
		}, "x/evil"},
		{"hard link to outside through a symlink", []tar.Header{
			{Typeflag: tar.TypeSymlink, Name: "x", Linkname: outside},
			{Typeflag: tar.TypeReg, Name: "f", Size: 4, Mode: 0o644},
			{Typeflag: tar.TypeLink, Name: "x/evil", Linkname: "f"},
		}, "x/evil"},
		{"dot-dot", []tar.Header{
			{Typeflag: tar.TypeReg, Name: "a/../../evil", Size: 4, Mode: 0o644},
		}, "a/../../evil"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			archive := filepath.Join(t.TempDir(), "crafted.tgz")
			writeTgz(t, archive, tc.members)
			if err := os.RemoveAll(outside); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(outside, 0o755); err != nil {
				t.Fatal(err)
			}
			dst := filepath.Join(filepath.Dir(outside), "dst")
			if err := os.RemoveAll(dst); err != nil {
				t.Fatal(err)
			}
			err := Extract(archive, "", dst)
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.HasPrefix(err.Error(), "crafted.tgz: ") || !strings.Contains(err.Error(), tc.member) {
				t.Errorf("error %q does not name the archive and member %q", err, tc.member)
			}
			if entries, _ := os.ReadDir(outside); len(entries) != 0 {
				t.Errorf("wrote outside the destination: %v", entries)
			}
		})
	}
}

// writeTgz writes a .tgz of members; regular files hold "evil".
func writeTgz(t *testing.T, path string, members []tar.Header) {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, h := range members {
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write([]byte("evil")); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// The digests Write keeps beside a layer are the layer's, as Open reports
// them whether they were kept or must be computed (a layer fetched from a
// shared cache comes without them).
func TestDigests(t *testing.T) {
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "app"), bytes.Repeat([]byte("bosh "), 100000), 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "app.tar.gz")
	if err := Write(p, func(w *Writer) error { return w.AddDir(src, "var/vcap/packages/app") }); err != nil {
		t.Fatal(err)
	}
	kept, err := readDigests(p)
	if err != nil {
		t.Fatal(err)
	}
	computed, err := compute(p)
	if err != nil {
		t.Fatal(err)
	}
	if kept != computed {
		t.Errorf("kept %+v, computed %+v", kept, computed)
	}
	if err := os.Remove(digestsPath(p)); err != nil {
		t.Fatal(err)
	}
	l, err := Open(p, types.OCILayer)
	if err != nil {
		t.Fatal(err)
	}
	want, err := tarball.LayerFromFile(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, get := range []func(v1.Layer) (v1.Hash, error){v1.Layer.Digest, v1.Layer.DiffID} {
		got, err1 := get(l)
		w, err2 := get(want)
		if err1 != nil || err2 != nil || got != w {
			t.Errorf("Open gives %s (%v), go-containerregistry %s (%v)", got, err1, w, err2)
		}
	}
	if again, err := readDigests(p); err != nil || again != computed {
		t.Errorf("digests kept by Open: %+v %v", again, err)
	}
}

// Walk passes names as they are to a reader that looks members up (a
// release tarball's), stops when told, and in contained mode refuses a
// name that leaves the archive.
func TestWalkNames(t *testing.T) {
	archive := filepath.Join(t.TempDir(), "walk.tgz")
	writeTgz(t, archive, []tar.Header{
		{Typeflag: tar.TypeDir, Name: "./", Mode: 0o755},
		{Typeflag: tar.TypeReg, Name: "./release.MF", Size: 4, Mode: 0o644},
		{Typeflag: tar.TypeReg, Name: "../up", Size: 4, Mode: 0o644},
		{Typeflag: tar.TypeReg, Name: "jobs/a.tgz", Size: 4, Mode: 0o644},
	})
	walk := func(contained bool, stopAt string) ([]string, error) {
		f, err := os.Open(archive)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		var seen []string
		err = Walk(f, contained, func(name string, _ *tar.Header, _ io.Reader) error {
			seen = append(seen, name)
			if name == stopAt {
				return ErrStop
			}
			return nil
		})
		return seen, err
	}
	if seen, err := walk(false, ""); err != nil || strings.Join(seen, " ") != ". release.MF ../up jobs/a.tgz" {
		t.Errorf("as they are: %v, %v", seen, err)
	}
	if seen, err := walk(false, "release.MF"); err != nil || strings.Join(seen, " ") != ". release.MF" {
		t.Errorf("stopped: %v, %v", seen, err)
	}
	if seen, err := walk(true, ""); err == nil || err.Error() != `member "../up" leaves the archive` || strings.Join(seen, " ") != "release.MF" {
		t.Errorf("contained: %v, %v", seen, err)
	}
}
