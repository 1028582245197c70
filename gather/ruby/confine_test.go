package ruby_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/bosh-injector/bosh-injector/gather/ruby"
)

// TestConfine renders, as the gathering does, a template reading a file in
// a hidden directory, one beside it, and the hidden one through this
// process's /proc root: only the one beside it reads. Writing and running
// programs fail as offline. This process itself still reads the hidden
// file.
func TestConfine(t *testing.T) {
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
	c, err := ruby.Confine(hidden)
	if err != nil {
		t.Skip(err)
	}
	read := `<%= begin; File.read(ENV["F"]); rescue SystemCallError => e; e.class; end %>`
	for _, tc := range []struct{ file, want string }{
		{filepath.Join(hidden, "token"), "Errno::EACCES"},
		{filepath.Join("/proc", strconv.Itoa(os.Getpid()), "root", hidden, "token"), "Errno::EACCES"},
		{filepath.Join(dir, "visible"), "visible"},
		{"/etc/hostname", strings.TrimSpace(readFile(t, "/etc/hostname"))},
	} {
		t.Setenv("F", tc.file)
		out := renderWith(t, ruby.Renderer{Confinement: c}, ruby.Template{Name: "read.erb", Source: read})
		if got := strings.TrimSpace(string(out[0].Content)); got != tc.want || out[0].Error != "" {
			t.Errorf("%s: read %q (error %q), want %q", tc.file, got, out[0].Error, tc.want)
		}
	}
	out := renderWith(t, ruby.Renderer{Confinement: c},
		ruby.Template{Name: "write.erb", Source: `<% File.write(` + strconv.Quote(filepath.Join(dir, "new")) + `, "x") %>`},
		ruby.Template{Name: "run.erb", Source: "<%= `id` %>"})
	for i, want := range []string{"Error filling in template 'write.erb' (line 1: Permission denied", "Error filling in template 'run.erb' (line 1: Permission denied"} {
		if !strings.HasPrefix(out[i].Error, want) {
			t.Errorf("got %q, want %q", out[i].Error, want)
		}
	}
	if readFile(t, filepath.Join(hidden, "token")) != "secret-token" {
		t.Error("the process itself lost the hidden file")
	}
}

func renderWith(t *testing.T, r ruby.Renderer, templates ...ruby.Template) []ruby.Output {
	t.Helper()
	out, err := r.Render(context.Background(), []ruby.Job{{Spec: spec(propsP(nil), ""), Templates: templates}})
	if err != nil {
		t.Fatal(err)
	}
	return out[0]
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
