package ruby_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/bosh-injector/bosh-injector/gather/render/ruby"
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
	for _, tc := range []struct{ file, want string }{
		{filepath.Join(hidden, "token"), "Errno::EACCES"},
		{filepath.Join("/proc", strconv.Itoa(os.Getpid()), "root", hidden, "token"), "Errno::EACCES"},
		{filepath.Join(dir, "visible"), "visible"},
		{"/etc/hostname", strings.TrimSpace(readFile(t, "/etc/hostname"))},
	} {
		read := `<%= begin; File.read(` + strconv.Quote(tc.file) + `); rescue SystemCallError => e; e.class; end %>`
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

// TestConfineOfflineReach: offline, a template opens no socket (UDP, a
// named UNIX socket that listens), sees none of the caller's environment,
// reads no system configuration beyond Ruby's needs, and cannot allocate
// past Ruby's memory bound; the release itself still reads.
func TestConfineOfflineReach(t *testing.T) {
	rel := t.TempDir()
	if err := os.WriteFile(filepath.Join(rel, "f"), []byte("release file"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := ruby.ConfineOffline(rel)
	if err != nil {
		t.Skip(err)
	}
	sock := filepath.Join(t.TempDir(), "engine.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	t.Setenv("PLANTED_TOKEN", "planted-secret-token")
	try := func(code string) string {
		return `<%= begin; ` + code + `; rescue SystemCallError, NoMemoryError => e; e.class; end %>`
	}
	out := renderWith(t, ruby.Renderer{Confinement: c},
		ruby.Template{Name: "udp.erb", Source: try(`require "socket"; UDPSocket.new.send("x", 0, "127.0.0.1", 9)`)},
		ruby.Template{Name: "unix.erb", Source: try(`require "socket"; UNIXSocket.new(` + strconv.Quote(sock) + `)`)},
		ruby.Template{Name: "env.erb", Source: `<%= ENV.to_h.inspect %>`},
		ruby.Template{Name: "config.erb", Source: try(`File.read("/usr/local/etc/x") rescue Errno::ENOENT; Dir.children("/etc/ssl/private")`)},
		ruby.Template{Name: "memory.erb", Source: try(`("a" * 1_500_000_000).size`)},
		ruby.Template{Name: "release.erb", Source: try(`File.read(` + strconv.Quote(filepath.Join(rel, "f")) + `)`)},
	)
	for i, want := range []string{"Errno::EACCES", "Errno::EACCES", "", "Errno::EACCES", "NoMemoryError", "release file"} {
		got := string(out[i].Content)
		if out[i].Error != "" || (want != "" && got != want) {
			t.Errorf("template %d: %q (error %q), want %q", i, got, out[i].Error, want)
		}
	}
	if env := string(out[2].Content); strings.Contains(env, "PLANTED_TOKEN") || strings.Contains(env, "planted-secret-token") {
		t.Errorf("the caller's environment reached the template: %s", env)
	}
}
