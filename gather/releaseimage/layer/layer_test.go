package layer

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"
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
