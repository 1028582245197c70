package ruby_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bosh-injector/bosh-injector/gather/render/ruby"
)

// hostileJobs is a job with a good template, then the hostile one, then
// another: the error must name the hostile one.
func hostileJobs(source string) []ruby.Job {
	return []ruby.Job{{Group: "ig", Name: "myjob", Spec: spec(propsP(nil), ""), Templates: []ruby.Template{
		{Name: "good.erb", Source: "<%= p('port') %>"},
		{Name: "hostile.erb", Source: source},
		{Name: "after.erb", Source: "after"},
	}}}
}

// namesHostile is the error of a render that failed in hostile.erb.
func namesHostile(t *testing.T, err error, want string) {
	t.Helper()
	if err == nil {
		t.Fatal("the render succeeded")
	}
	msg := err.Error()
	for _, part := range []string{"instance group 'ig'", "job 'myjob'", "Error filling in template 'hostile.erb' (" + want} {
		if !strings.Contains(msg, part) {
			t.Errorf("error %q does not contain %q", msg, part)
		}
	}
	noStack(t, msg)
}

func noStack(t *testing.T, msg string) {
	t.Helper()
	for _, stack := range []string{"goroutine ", ".go:", "context.rb", "\tfrom ", "-e:"} {
		if strings.Contains(msg, stack) {
			t.Errorf("error %q holds a stack (%q)", msg, stack)
		}
	}
}

// TestHostileRender: templates that end, hang, flood or break the
// renderer fail the render with an error naming the group, job and
// template, in seconds, and leave no process behind.
func TestHostileRender(t *testing.T) {
	// Short for the loops, long for the others (a loaded machine starts
	// Ruby slowly).
	const loop, other = 3 * time.Second, 30 * time.Second
	cases := []struct {
		name, source, err string
		timeout           time.Duration
	}{
		{"loop", "<% loop {} %>", "rendering did not finish within the render timeout of 3s)", loop},
		{"exit", "<% exit %>", "Ruby ended while rendering it: exit status 0)", other},
		{"exit!", "<% exit!(7) %>", "Ruby ended while rendering it: exit status 7)", other},
		{"abort", "<% abort('bye') %>", "Ruby ended while rendering it: exit status 1)", other},
		{"writes to the results", "<% IO.for_fd(3, autoclose: false).syswrite('garbage') %>", "Ruby's results became unreadable while rendering it", other},
		{"forges a huge result", "<% IO.for_fd(3, autoclose: false).syswrite('C' + [1 << 40].pack('Q>')) %>", "its rendered output exceeds 1 MiB, the limit per template)", other},
		{"closes the results", "<% IO.for_fd(3).close %>", "Ruby ended while rendering it", other},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			start := time.Now()
			_, err := ruby.Renderer{Timeout: c.timeout, MaxOutput: 1 << 20}.Render(context.Background(), hostileJobs(c.source))
			namesHostile(t, err, c.err)
			if took := time.Since(start); took > c.timeout+5*time.Second {
				t.Errorf("took %s", took)
			}
		})
	}
}

// TestHarmlessRender: what a template prints, and the processes it leaves
// running, neither break nor hold up the render; the processes are killed
// with it, even one that left Ruby's process group.
func TestHarmlessRender(t *testing.T) {
	for i, c := range []struct{ name, source string }{
		{"STDOUT", "<% STDOUT.write('garbage'); $stdout.puts('more'); STDERR.write('x' * 100_000) %>"},
		{"descriptor 1", "<% IO.for_fd(1, autoclose: false).write('{}') %>"},
		{"child holding the pipes", "<% fork { $0 = MARKER; sleep 60 } %>"},
		{"spawned child holding stdout", "<% spawn(['sleep', MARKER], '60') %>"},
		{"child in a new session", "<% fork { Process.setsid; $0 = MARKER; sleep 60 } %>"},
	} {
		t.Run(c.name, func(t *testing.T) {
			marker := "bosh-injector-test-child-" + strconv.Itoa(os.Getpid()) + "-" + strconv.Itoa(i)
			start := time.Now()
			out, err := ruby.Renderer{Timeout: 30 * time.Second}.Render(context.Background(), hostileJobs(strings.ReplaceAll(c.source, "MARKER", strconv.Quote(marker))))
			if err != nil {
				t.Fatal(err)
			}
			if took := time.Since(start); took > 10*time.Second {
				t.Errorf("took %s", took)
			}
			if string(out[0][0].Content) != "8080" || string(out[0][2].Content) != "after" || out[0][1].Error != "" {
				t.Fatalf("got %+v", out[0])
			}
			if strings.Contains(c.name, "new session") && !ruby.PIDNamespaces() {
				t.Log("no PID namespace here: a process that left Ruby's group outlives the render")
				return
			}
			gone(t, marker)
		})
	}
}

// gone waits for the processes named marker to be killed.
func gone(t *testing.T, marker string) {
	t.Helper()
	var left []string
	for range 50 {
		left = nil
		procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
		for _, p := range procs {
			if cmdline, _ := os.ReadFile(p); strings.HasPrefix(string(cmdline), marker) {
				left = append(left, p)
			}
		}
		if len(left) == 0 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Errorf("processes outlived the render: %s", strings.Join(left, ", "))
}

// TestOutputBound: output past the limit fails the template at its line,
// before Ruby holds it.
func TestOutputBound(t *testing.T) {
	r := ruby.Renderer{MaxOutput: 1 << 20}
	for _, source := range []string{
		"a\n<% 2000.times do %><%= 'x' * 1000 %><% end %>",
		"a\n<%= 'x' * (2 << 20) %>",
	} {
		out, err := r.Render(context.Background(), hostileJobs(source))
		if err != nil {
			t.Fatal(err)
		}
		if want := "Error filling in template 'hostile.erb' (line 2: the rendered output exceeds 1 MiB, the limit per template)"; out[0][1].Error != want {
			t.Errorf("got %q, want %q", out[0][1].Error, want)
		}
		if string(out[0][2].Content) != "after" {
			t.Errorf("the next template rendered %+v", out[0][2])
		}
	}
	out, err := r.Render(context.Background(), hostileJobs("<%= 'x' * (1 << 20) %>"))
	if err != nil || len(out[0][1].Content) != 1<<20 {
		t.Errorf("output of exactly the limit: %v", err)
	}
}

// TestConfinedRender: confined offline, a template reads the releases and
// Ruby's own files, and nothing of the user's; it writes, creates and runs
// nothing; it cannot signal the process rendering it.
func TestConfinedRender(t *testing.T) {
	dir := t.TempDir()
	release, private := filepath.Join(dir, "release"), filepath.Join(dir, "private")
	for _, d := range []string{release, private} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "file"), []byte(filepath.Base(d)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c, err := ruby.ConfineOffline(release)
	if err != nil {
		t.Skip(err)
	}
	q := strconv.Quote
	cases := []struct{ name, source, want string }{
		{"reads the release", "<%= File.read(" + q(filepath.Join(release, "file")) + ") %>", "release"},
		{"reads Ruby's libraries", "<% require 'digest' %><%= Digest::SHA256.hexdigest('') [0, 4] %> <%= Time.now.year > 2000 %>", "e3b0 true"},
		{"reads no user file", "<%= File.read(" + q(filepath.Join(private, "file")) + ") %>", "Permission denied"},
		{"writes no file", "<% File.write(" + q(filepath.Join(private, "new")) + ", 'x') %>", "Permission denied"},
		{"changes no file", "<% File.write(" + q(filepath.Join(release, "file")) + ", 'x') %>", "Permission denied"},
		{"removes no file", "<% File.unlink(" + q(filepath.Join(release, "file")) + ") %>", "Permission denied"},
		{"runs no program", "<% system('touch', " + q(filepath.Join(private, "touched")) + ", exception: true) %>", "Permission denied"},
		{"runs no shell", "<%= `touch " + filepath.Join(private, "touched") + "` %>", "Permission denied"},
		// Landlock's scope refuses it; in a PID namespace the process is
		// not even there.
		{"signals no one outside", "<% Process.kill('TERM', " + strconv.Itoa(os.Getpid()) + ") %>", "Operation not permitted|No such process"},
	}
	// One render, a template per case: Ruby starts once.
	job := ruby.Job{Group: "ig", Name: "myjob", Spec: spec(propsP(nil), "")}
	for _, tc := range cases {
		job.Templates = append(job.Templates, ruby.Template{Name: tc.name, Source: tc.source})
	}
	out, err := ruby.Renderer{Timeout: 30 * time.Second, Confinement: c}.Render(context.Background(), []ruby.Job{job})
	if err != nil {
		t.Fatal(err)
	}
	for i, tc := range cases {
		got := out[0][i]
		if !regexp.MustCompile(tc.want).MatchString(string(got.Content) + got.Error) {
			t.Errorf("%s: got %q (error %q), want %q", tc.name, got.Content, got.Error, tc.want)
		}
		if got.Error != "" && !strings.HasPrefix(got.Error, "Error filling in template '"+tc.name+"' (line 1: ") {
			t.Errorf("%s: error %q does not name the template and line", tc.name, got.Error)
		}
		noStack(t, got.Error)
	}
	for _, p := range []string{filepath.Join(private, "new"), filepath.Join(private, "touched")} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s was created", p)
		}
	}
	if data, err := os.ReadFile(filepath.Join(release, "file")); err != nil || string(data) != "release" {
		t.Errorf("the release's file was changed: %q %v", data, err)
	}
}
