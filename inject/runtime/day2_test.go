package runtime_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/bosh-injector/bosh-injector/inject/runtime"
	"github.com/bosh-injector/bosh-injector/inject/runtime/contract"
)

// TestStatusFromTheStateDirectory: each process container's state from
// its launcher's marks, and a failed post-start.
func TestStatusFromTheStateDirectory(t *testing.T) {
	st := runtime.State{Dir: t.TempDir()}
	in := runtime.Instance{State: st, Plan: contract.Plan{Instance: contract.Instance{
		Containers: []string{"run", "start", "stop", "dead"},
		Jobs:       []contract.Job{{Name: "web", Scripts: []string{contract.PostStart}, Host: "run"}, {Name: "ok", Scripts: []string{contract.PostStart}, Host: "run"}},
	}}}
	for name, content := range map[string]string{"run.pid": "1", "start.starting": "", "stop.stopped": "", "post-start-web.failed": "post-start of job 'web' failed: exit status 1"} {
		if err := st.Mark(name, content); err != nil {
			t.Fatal(err)
		}
	}
	got := in.Status(true)
	var states []string
	for _, p := range got.Processes {
		states = append(states, p.Container+"="+p.State)
	}
	if strings.Join(states, " ") != "run=running start=starting stop=stopped dead=failing" {
		t.Errorf("processes: %v", states)
	}
	if len(got.Failed) != 1 || got.Failed[0].Job != "web" || !strings.Contains(got.Failed[0].Message, "exit status 1") {
		t.Errorf("failed: %+v", got.Failed)
	}
	if p := in.Status(false).Processes[3]; p.State != contract.StateStarting {
		t.Errorf("before the setup ended, a process without marks is %s, want starting", p.State)
	}
}

// TestArchiveLogsAsTheAgentPacksThem: entries relative to the log
// directory, every job's or only those asked for.
func TestArchiveLogsAsTheAgentPacksThem(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"web/web.stdout.log", "web/web.stderr.log", "db/db.stdout.log"} {
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), []byte("line of "+f+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	entries := func(jobs ...string) map[string]string {
		var buf bytes.Buffer
		if err := runtime.ArchiveLogs(&buf, dir, jobs); err != nil {
			t.Fatal(err)
		}
		gz, err := gzip.NewReader(&buf)
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(gz)
		out := map[string]string{}
		for {
			h, err := tr.Next()
			if err == io.EOF {
				return out
			}
			if err != nil {
				t.Fatal(err)
			}
			data, _ := io.ReadAll(tr)
			out[h.Name] = string(data)
		}
	}
	all := entries()
	if all["./web/web.stdout.log"] != "line of web/web.stdout.log\n" || all["./db/db.stdout.log"] == "" || len(all) != 5 {
		t.Errorf("all logs: %v", all)
	}
	web := entries("web")
	var names []string
	for n := range web {
		names = append(names, n)
	}
	slices.Sort(names)
	if strings.Join(names, " ") != "./web/ ./web/web.stderr.log ./web/web.stdout.log" {
		t.Errorf("--job web: %v", names)
	}
}

// TestShellAsVcap: -c runs as vcap, or root when asked, with its exit code.
func TestShellAsVcap(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to become vcap")
	}
	for root, want := range map[bool]string{false: "1000", true: "0"} {
		var out bytes.Buffer
		code, err := runtime.Shell(context.Background(), root, "id -u; exit 7", nil, &out, io.Discard)
		if err != nil || code != 7 || strings.TrimSpace(out.String()) != want {
			t.Errorf("root=%v: exit %d, %v, output %q; want 7 and uid %s", root, code, err, out.String(), want)
		}
	}
}
