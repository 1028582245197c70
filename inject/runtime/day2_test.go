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
	"sync"
	"testing"
	"time"

	"github.com/bosh-injector/bosh-injector/gather/names"
	"github.com/bosh-injector/bosh-injector/inject/runtime"
	"github.com/bosh-injector/bosh-injector/inject/runtime/contract"
)

// TestStatusFromTheStateDirectory: each process container's state from
// its launcher's marks, and a failed post-start.
func TestStatusFromTheStateDirectory(t *testing.T) {
	st := runtime.State{Dir: t.TempDir()}
	in := runtime.Instance{State: st, Plan: contract.Plan{Instance: contract.Instance{
		Containers: []string{"run", "young", "start", "stop", "dead"},
		Jobs:       []contract.Job{{Name: "web", Scripts: []string{contract.PostStart}, Host: "run"}, {Name: "ok", Scripts: []string{contract.PostStart}, Host: "run"}},
	}}}
	for name, content := range map[string]string{"run.pid": "1", "young.pid": "2", "start.starting": "", "stop.stopped": "", "post-start-web.failed": "post-start of job 'web' failed: exit status 1"} {
		if err := st.Mark(name, content); err != nil {
			t.Fatal(err)
		}
	}
	// A process started StartCheck ago or more runs; a younger one is
	// starting, as monit's "initializing" is to the agent.
	old := time.Now().Add(-runtime.StartCheck)
	if err := os.Chtimes(filepath.Join(st.Dir, "run.pid"), old, old); err != nil {
		t.Fatal(err)
	}
	got := in.Status(true)
	var states []string
	for _, p := range got.Processes {
		states = append(states, p.Container+"="+p.State)
	}
	if strings.Join(states, " ") != "run=running young=starting start=starting stop=stopped dead=failing" {
		t.Errorf("processes: %v", states)
	}
	if len(got.Failed) != 1 || got.Failed[0].Job != "web" || !strings.Contains(got.Failed[0].Message, "exit status 1") {
		t.Errorf("failed: %+v", got.Failed)
	}
	if p := in.Status(false).Processes[4]; p.State != contract.StateStarting {
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

// TestStopAndStartInThePod: the desired state "stopped" runs pre-stop and
// drain (told the VM stays), stops both processes and runs post-stop,
// while the launchers keep running; a launcher started again (the
// container restarted) stays stopped; "started" starts the processes
// again and post-start runs again. With skip-drain, drain does not run.
func TestStopAndStartInThePod(t *testing.T) {
	needRoot(t)
	vcap, _ := instanceDir(t, "web", "processes:\n- name: a\n  executable: EXE\n  workdir: JOBDIR\n  env: {RUNTIME_TEST_CHILD: \"1\"}\n- name: b\n  executable: EXE\n  workdir: JOBDIR\n  env: {RUNTIME_TEST_CHILD: \"1\"}\n",
		map[string]string{
			"post-start": "echo post-start >> LOG\n",
			"pre-stop":   "echo pre-stop $BOSH_VM_NEXT_STATE $BOSH_INSTANCE_NEXT_STATE >> LOG\n",
			"drain":      "echo drain $1 >> LOG\necho 0\n",
			"post-stop":  "echo post-stop >> LOG\n",
		})
	log := filepath.Join(vcap, "lifecycle.log")
	for _, s := range []string{"post-start", "pre-stop", "drain", "post-stop"} {
		p := filepath.Join(vcap, "jobs", "web", "bin", s)
		data, _ := os.ReadFile(p)
		write(t, p, strings.ReplaceAll(string(data), "LOG", log), 0o755)
	}
	desired := filepath.Join(vcap, "desired")
	want := func(state, skip string) {
		write(t, filepath.Join(desired, contract.DesiredStateFile), state, 0o644)
		write(t, filepath.Join(desired, contract.SkipDrainFile), skip, 0o644)
	}
	want("", "")
	jobs := []contract.Job{{Name: "web", Scripts: []string{"post-start", "pre-stop", "drain", "post-stop"}, Host: "web-a"}}
	instance := contract.Instance{Containers: []string{"web-a", "web-b"}, Jobs: jobs, DrainSeconds: 30}
	var out syncBuffer
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var wg sync.WaitGroup
	status := func() string {
		in := runtime.Instance{Plan: contract.Plan{Instance: instance}, State: runtime.State{Dir: filepath.Join(vcap, "sys", "run", "bosh-injector")}}
		var s []string
		for _, p := range in.Status(true).Processes {
			s = append(s, p.State)
		}
		return strings.Join(s, " ")
	}
	run := func(container, process string) context.CancelFunc {
		l := launcher(vcap, contract.Plan{Job: "web", Process: process, Container: container, Instance: instance}, &out)
		l.Desired = desired
		cctx, cancel := context.WithCancel(ctx)
		wg.Go(func() {
			if _, err := l.Run(cctx); err != nil {
				t.Error(err)
			}
		})
		return cancel
	}
	lifecycle := func() string { data, _ := os.ReadFile(log); return string(data) }
	run("web-a", "a")
	restartB := run("web-b", "b")
	waitFor(t, "post-start", func() bool { return lifecycle() == "post-start\n" && status() == "running running" })

	want(names.DesiredStopped, "")
	waitFor(t, "the stop", func() bool { return status() == "stopped stopped" && strings.HasSuffix(lifecycle(), "post-stop\n") })
	// The container restarts: its launcher starts stopped.
	restartB()
	run("web-b", "b")
	time.Sleep(500 * time.Millisecond)
	if s := status(); s != "stopped stopped" {
		t.Fatalf("after a container restart while stopped: %s", s)
	}

	want("", "")
	waitFor(t, "the start", func() bool { return status() == "running running" && strings.Count(lifecycle(), "post-start") == 2 })
	want(names.DesiredStopped, "true")
	waitFor(t, "the stop without drain", func() bool { return status() == "stopped stopped" && strings.Count(lifecycle(), "post-stop") == 2 })
	stop()
	wg.Wait()
	if got, want := lifecycle(), "post-start\npre-stop keep keep\ndrain job_shutdown\npost-stop\npost-start\npre-stop keep keep\npost-stop\n"; got != want {
		t.Errorf("lifecycle:\n%s\nwant:\n%s", got, want)
	}
}
