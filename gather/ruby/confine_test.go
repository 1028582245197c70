package ruby_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/bosh-injector/bosh-injector/gather/ruby"
)

// TestConfine renders, in a process of its own (Confine is for the whole
// process), a template reading a file in a hidden directory, one beside
// it, and the hidden one through the parent's /proc root: only the one
// beside it reads. The process itself still reads the hidden file.
func TestConfine(t *testing.T) {
	if os.Getenv("CONFINE_HIDDEN") == "" {
		dir := t.TempDir()
		hidden := filepath.Join(dir, "token")
		for path, content := range map[string]string{filepath.Join(hidden, "token"): "secret-token", filepath.Join(dir, "visible"): "visible"} {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		cmd := exec.Command(os.Args[0], "-test.run=^TestConfine$", "-test.v")
		cmd.Env = append(os.Environ(), "CONFINE_HIDDEN="+hidden, "CONFINE_DIR="+dir)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		if !strings.Contains(string(out), "--- PASS: TestConfine") {
			t.Fatalf("the confined run did not pass:\n%s", out)
		}
		return
	}
	hidden, dir := os.Getenv("CONFINE_HIDDEN"), os.Getenv("CONFINE_DIR")
	if err := ruby.Confine(hidden); err != nil {
		t.Fatal(err)
	}
	read := `<%= begin; File.read(ENV["F"]); rescue SystemCallError => e; e.class; end %>`
	for _, c := range []struct{ file, want string }{
		{filepath.Join(hidden, "token"), "Errno::EACCES"},
		{filepath.Join("/proc", strconv.Itoa(os.Getpid()), "root", hidden, "token"), "Errno::EACCES"},
		{filepath.Join(dir, "visible"), "visible"},
		{"/etc/hostname", strings.TrimSpace(readFile(t, "/etc/hostname"))},
	} {
		t.Setenv("F", c.file)
		out := render(t, spec(propsP(nil), ""), ruby.Template{Name: "read.erb", Source: read})
		if got := strings.TrimSpace(string(out[0].Content)); got != c.want || out[0].Error != "" {
			t.Errorf("%s: read %q (error %q), want %q", c.file, got, out[0].Error, c.want)
		}
	}
	if readFile(t, filepath.Join(hidden, "token")) != "secret-token" {
		t.Error("the process itself lost the hidden file")
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
