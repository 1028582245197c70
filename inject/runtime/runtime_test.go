package runtime_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/bosh-injector/bosh-injector/gather/model/bpm"
	"github.com/bosh-injector/bosh-injector/gather/names"
	"github.com/bosh-injector/bosh-injector/inject/runtime"
	"github.com/bosh-injector/bosh-injector/inject/runtime/contract"
)

// The test binary doubles as the BPM process: with childEnv set it reports
// what it was given and waits for a signal.
const childEnv = "RUNTIME_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		child()
		return
	}
	// Tests of other things than the start's check do not wait for it.
	runtime.StartCheck = 50 * time.Millisecond
	os.Exit(m.Run())
}

func child() {
	// Handlers first: the test signals once "to stderr" is out, and a
	// signal before them is lost where it is ignored (a background job).
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGQUIT)
	status, _ := os.ReadFile("/proc/self/status")
	for _, line := range strings.Split(string(status), "\n") {
		if strings.HasPrefix(line, "Uid:") || strings.HasPrefix(line, "CapAmb:") || strings.HasPrefix(line, "CapEff:") {
			fmt.Println(strings.Join(strings.Fields(line), " "))
		}
	}
	var nofile syscall.Rlimit
	_ = syscall.Getrlimit(syscall.RLIMIT_NOFILE, &nofile)
	fmt.Printf("nofile %d %d\n", nofile.Cur, nofile.Max)
	wd, _ := os.Getwd()
	fmt.Printf("workdir %s\nGREETING=%s\n", wd, os.Getenv("GREETING"))
	if port := os.Getenv("BIND"); port != "" {
		l, err := net.Listen("tcp", "127.0.0.1:"+port)
		if err != nil {
			fmt.Println("bind failed:", err)
		} else {
			fmt.Println("bound", port)
			l.Close()
		}
	}
	fmt.Fprintln(os.Stderr, "to stderr")
	if os.Getenv("IGNORE_SIGNALS") != "" {
		for s := range sigs {
			fmt.Println("ignoring", s)
		}
	}
	fmt.Println("got", <-sigs)
}

// syncBuffer is a buffer written by several goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// instanceDir lays out a /var/vcap with job's bpm.yml and scripts, readable
// by vcap, and copies the test binary in as the process.
func instanceDir(t *testing.T, job, bpmYAML string, scripts map[string]string) (vcap, exe string) {
	t.Helper()
	vcap = t.TempDir()
	for _, d := range []string{filepath.Dir(vcap), vcap} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	exe = filepath.Join(vcap, "packages", "child", "bin", "child")
	write(t, exe, string(data), 0o755)
	write(t, filepath.Join(vcap, "jobs", job, "config", "bpm.yml"), strings.NewReplacer("EXE", exe, "JOBDIR", filepath.Join(vcap, "jobs", job)).Replace(bpmYAML), 0o644)
	for name, body := range scripts {
		write(t, filepath.Join(vcap, "jobs", job, "bin", name), "#!/bin/sh\n"+body, 0o755)
	}
	return vcap, exe
}

func write(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	for d := filepath.Dir(path); len(d) > 1; d = filepath.Dir(d) {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

func launcher(vcap string, plan contract.Plan, out *syncBuffer) *runtime.Launcher {
	return &runtime.Launcher{Plan: plan, VCAP: vcap, State: runtime.State{Dir: filepath.Join(vcap, "sys", "run", "bosh-injector")},
		Out: out, Err: out, Log: logr.Discard(), StopTimeout: 2 * time.Second, QuitGrace: 500 * time.Millisecond, PostStopWait: 2 * time.Second}
}

// runInBackground runs the launcher until ctx ends; its exit code comes on
// the channel.
func runInBackground(t *testing.T, ctx context.Context, l *runtime.Launcher) <-chan int {
	done := make(chan int, 1)
	go func() {
		code, err := l.Run(ctx)
		if err != nil {
			t.Error(err)
		}
		done <- code
	}()
	return done
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func needRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the launcher drops from root to vcap: run as root")
	}
}

func TestLauncherRunsTheProcessAsBPM(t *testing.T) {
	needRoot(t)
	vcap, _ := instanceDir(t, "web", `
processes:
- name: server
  executable: EXE
  workdir: JOBDIR
  env: {GREETING: hello, RUNTIME_TEST_CHILD: "1", BIND: "81"}
  capabilities: [NET_BIND_SERVICE]
  limits: {open_files: 4096}
  shutdown_signal: INT
`, nil)
	var out syncBuffer
	plan := contract.Plan{Job: "web", Process: "server", Container: "web-server", Instance: contract.Instance{Containers: []string{"web-server"}}}
	l := launcher(vcap, plan, &out)
	ctx, stop := context.WithCancel(context.Background())
	done := runInBackground(t, ctx, l)
	waitFor(t, "the process's output", func() bool { return strings.Contains(out.String(), "to stderr") })
	in := runtime.Instance{Plan: plan, State: l.State, Scripts: runtime.Scripts{VCAP: vcap, Out: &out, Err: &out}}
	if err := in.Alive(); err != nil {
		t.Error(err)
	}
	if err := in.Ready(context.Background(), time.Now().Add(runtime.ReadyBudget)); err != nil {
		t.Error(err)
	}
	stop()
	if code := <-done; code != 0 {
		t.Errorf("exit code %d", code)
	}
	got := out.String()
	for _, want := range []string{
		"Uid: 1000 1000 1000 1000",
		"CapAmb: 0000000000000400", // NET_BIND_SERVICE only
		"CapEff: 0000000000000400",
		"nofile 4096 4096",
		"workdir " + filepath.Join(vcap, "jobs", "web"),
		"GREETING=hello",
		"bound 81",
		"got interrupt", // shutdown_signal: INT
	} {
		if !strings.Contains(got, want) {
			t.Errorf("process output lacks %q:\n%s", want, got)
		}
	}
	stdout, _ := os.ReadFile(filepath.Join(vcap, "sys", "log", "web", "server.stdout.log"))
	stderr, _ := os.ReadFile(filepath.Join(vcap, "sys", "log", "web", "server.stderr.log"))
	if !strings.Contains(string(stdout), "GREETING=hello") || strings.Contains(string(stdout), "to stderr") || string(stderr) != "to stderr\n" {
		t.Errorf("BPM log files:\nstdout:\n%s\nstderr:\n%s", stdout, stderr)
	}
	if err := in.Alive(); err == nil {
		t.Error("a stopped process is alive")
	}
}

func TestLauncherWorkdirMissing(t *testing.T) {
	vcap, _ := instanceDir(t, "web", "processes:\n- name: server\n  executable: EXE\n", nil)
	var out syncBuffer
	l := launcher(vcap, contract.Plan{Job: "web", Process: "other", Container: "web-other"}, &out)
	if _, err := l.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "has no process 'other'") {
		t.Errorf("got %v", err)
	}
}

func TestLauncherKillsAfterBPMWait(t *testing.T) {
	needRoot(t)
	vcap, _ := instanceDir(t, "web", "processes:\n- name: server\n  executable: EXE\n  workdir: JOBDIR\n  env: {RUNTIME_TEST_CHILD: \"1\", IGNORE_SIGNALS: \"1\"}\n", nil)
	var out syncBuffer
	l := launcher(vcap, contract.Plan{Job: "web", Process: "server", Container: "web-server"}, &out)
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		code, _ := l.Run(ctx)
		done <- code
	}()
	waitFor(t, "the process", func() bool { return strings.Contains(out.String(), "to stderr") })
	stop()
	if code := <-done; code != 137 {
		t.Errorf("exit code %d, want 137 (killed)", code)
	}
	if got := out.String(); !strings.Contains(got, "ignoring terminated") || !strings.Contains(got, "ignoring quit") {
		t.Errorf("want TERM, then QUIT, then KILL:\n%s", got)
	}
}

// A two-container instance: post-start gates readiness and runs once all
// processes run; pre-stop and a dynamic drain run once before the stop,
// post-stop after every process stopped.
func TestInstanceLifecycle(t *testing.T) {
	needRoot(t)
	log := "/var/vcap/sys/log/web/lifecycle.log"
	vcap, _ := instanceDir(t, "web", "processes:\n- name: a\n  executable: EXE\n  workdir: JOBDIR\n  env: {RUNTIME_TEST_CHILD: \"1\"}\n- name: b\n  executable: EXE\n  workdir: JOBDIR\n  env: {RUNTIME_TEST_CHILD: \"1\"}\n",
		map[string]string{
			"post-start": "echo post-start >> LOG\n[ -f FAIL ] && { echo cannot reach the database; exit 1; }\nexit 0\n",
			"pre-stop":   "echo pre-stop $BOSH_VM_NEXT_STATE $BOSH_INSTANCE_NEXT_STATE $BOSH_DEPLOYMENT_NEXT_STATE >> LOG\n",
			"drain": `echo "drain $* state=$BOSH_JOB_STATE next=$BOSH_JOB_NEXT_STATE" >> LOG
n=$(cat COUNT 2>/dev/null || echo 0); echo $((n+1)) > COUNT
if [ "$n" -lt 2 ]; then echo -1; else echo 0; fi
`,
			"post-stop": "echo post-stop >> LOG\n",
		})
	for _, s := range []string{"post-start", "pre-stop", "drain", "post-stop"} {
		p := filepath.Join(vcap, "jobs", "web", "bin", s)
		data, _ := os.ReadFile(p)
		body := strings.NewReplacer("LOG", strings.Replace(log, "/var/vcap", vcap, 1), "COUNT", filepath.Join(vcap, "count"), "FAIL", filepath.Join(vcap, "fail")).Replace(string(data))
		write(t, p, body, 0o755)
	}
	write(t, filepath.Join(vcap, "fail"), "", 0o644)
	jobs := []contract.Job{{Name: "web", Scripts: []string{"post-start", "pre-stop", "drain", "post-stop"}, Host: "web-a"}}
	instance := contract.Instance{Containers: []string{"web-a", "web-b"}, Jobs: jobs, PersistentDiskMB: 1024, DrainSeconds: 30}
	plans := []contract.Plan{
		{Job: "web", Process: "a", Container: "web-a", Instance: instance},
		{Job: "web", Process: "b", Container: "web-b", Instance: instance},
	}
	var out syncBuffer
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var instances []runtime.Instance
	for _, p := range plans {
		l := launcher(vcap, p, &out)
		instances = append(instances, runtime.Instance{Plan: p, State: l.State, Scripts: runtime.Scripts{VCAP: vcap, Out: &out, Err: &out}, Log: logr.Discard()})
		wg.Go(func() {
			if _, err := l.Run(ctx); err != nil {
				t.Error(err)
			}
		})
	}
	lifecycle := func() string {
		data, _ := os.ReadFile(strings.Replace(log, "/var/vcap", vcap, 1))
		return string(data)
	}
	waitFor(t, "post-start", func() bool { return strings.Contains(lifecycle(), "post-start") })
	// A failing post-start keeps both containers not ready, naming the job
	// and its exit; what it printed only the status shows (`instances
	// --ps`), as the answer reaches Events.
	waitFor(t, "post-start to fail", func() bool {
		err := instances[1].Ready(context.Background(), time.Now().Add(runtime.ReadyBudget))
		return err != nil && strings.HasSuffix(err.Error(), "post-start of job 'web' failed: exit status 1")
	})
	if f := instances[1].Status(true).Failed; len(f) != 1 || f[0].Message != "post-start of job 'web' failed: exit status 1: cannot reach the database" {
		t.Errorf("the status of the failed post-start: %+v", f)
	}
	stop()
	wg.Wait()

	// Start again: post-start succeeds this time.
	os.Remove(filepath.Join(vcap, "fail"))
	ctx, stop = context.WithCancel(context.Background())
	defer stop()
	for _, p := range plans {
		l := launcher(vcap, p, &out)
		wg.Go(func() {
			if _, err := l.Run(ctx); err != nil {
				t.Error(err)
			}
		})
	}
	waitFor(t, "readiness", func() bool {
		return instances[0].Ready(context.Background(), time.Now().Add(runtime.ReadyBudget)) == nil && instances[1].Ready(context.Background(), time.Now().Add(runtime.ReadyBudget)) == nil
	})
	// Both containers' preStop hooks: scripts run once.
	var hooks sync.WaitGroup
	for _, in := range instances {
		hooks.Go(func() {
			if err := in.PreStop(context.Background()); err != nil {
				t.Error(err)
			}
		})
	}
	hooks.Wait()
	stop()
	wg.Wait()
	got := lifecycle()
	want := `post-start
post-stop
post-start
pre-stop delete keep keep
drain job_shutdown hash_unchanged state={"persistent_disk":1024} next={"persistent_disk":1024}
drain job_check_status hash_unchanged state={"persistent_disk":1024} next=
drain job_check_status hash_unchanged state={"persistent_disk":1024} next=
post-stop
`
	if got != want {
		t.Errorf("lifecycle:\n%s\nwant:\n%s", got, want)
	}
	if !strings.Contains(out.String(), "got terminated") {
		t.Errorf("the processes were not stopped with TERM:\n%s", out.String())
	}
	for _, f := range []string{"post-start.stdout.log", "pre-stop.stdout.log", "drain.stdout.log", "post-stop.stdout.log"} {
		if _, err := os.Stat(filepath.Join(vcap, "sys", "log", "web", f)); err != nil {
			t.Error(err)
		}
	}
}

// A job without bpm.yml: its monit file's start program daemonizes the
// process and writes the pidfile; the stop program stops it.
func TestLauncherRunsMonitProcesses(t *testing.T) {
	needRoot(t)
	vcap, exe := instanceDir(t, "legacy", "", map[string]string{
		"ctl": `case $1 in
start) RUNTIME_TEST_CHILD=1 EXE >> OUT 2>&1 & echo $! > PIDFILE ;;
stop) echo stop program >> OUT; kill $(cat PIDFILE) ;;
esac
`,
	})
	pidfile := filepath.Join(vcap, "sys", "run", "legacy", "legacy.pid")
	out := filepath.Join(vcap, "sys", "log", "legacy", "legacy.log")
	ctl := filepath.Join(vcap, "jobs", "legacy", "bin", "ctl")
	data, _ := os.ReadFile(ctl)
	write(t, ctl, strings.NewReplacer("EXE", exe, "OUT", out, "PIDFILE", pidfile).Replace(string(data)), 0o755)
	write(t, filepath.Join(vcap, "jobs", "legacy", "monit"), fmt.Sprintf(`check process legacy
  with pidfile %s
  start program "%s start" with timeout 60 seconds
  stop program "%s stop"
  group vcap
`, pidfile, ctl, ctl), 0o644)
	var buf syncBuffer
	plan := contract.Plan{Job: "legacy", Process: "legacy", Monit: true, Container: "legacy-legacy", Instance: contract.Instance{Containers: []string{"legacy-legacy"}}}
	l := launcher(vcap, plan, &buf)
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		code, err := l.RunMonit(ctx)
		if err != nil {
			t.Error(err)
		}
		done <- code
	}()
	in := runtime.Instance{Plan: plan, State: l.State}
	waitFor(t, "the monit process", func() bool {
		got, _ := os.ReadFile(out)
		return in.Alive() == nil && strings.Contains(string(got), "to stderr")
	})
	stop()
	if code := <-done; code != 0 {
		t.Errorf("exit code %d", code)
	}
	got, _ := os.ReadFile(out)
	if !strings.Contains(string(got), "stop program") || !strings.Contains(string(got), "got terminated") {
		t.Errorf("the process did not run and stop through the monit programs:\n%s", got)
	}
}

// The kubelet probes readiness as soon as it sees the container running,
// often before the launcher started the process: the probe waits for it
// rather than fail and be retried a whole period later.
func TestReadyWaitsForTheProcess(t *testing.T) {
	state := runtime.State{Dir: t.TempDir()}
	in := runtime.Instance{Plan: contract.Plan{Job: "web", Process: "web", Container: "web-web"}, State: state}
	go func() {
		time.Sleep(300 * time.Millisecond)
		_ = state.Mark("web-web.pid", fmt.Sprint(os.Getpid()))
	}()
	start := time.Now()
	if err := in.Ready(context.Background(), time.Now().Add(runtime.ReadyBudget)); err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(start); waited < 300*time.Millisecond {
		t.Errorf("ready after %s, before the process started", waited)
	}
}

// A process stopped on request (`stop`) is not ready at once: the probe
// does not wait the budget for it, so the pod leaves its Services' endpoints
// within the probe's failure threshold.
func TestReadyAnswersAtOnceForAStoppedProcess(t *testing.T) {
	state := runtime.State{Dir: t.TempDir()}
	if err := state.Mark("web-web.stopped", ""); err != nil {
		t.Fatal(err)
	}
	in := runtime.Instance{Plan: contract.Plan{Job: "web", Process: "web", Container: "web-web"}, State: state}
	start := time.Now()
	if err := in.Ready(context.Background(), time.Now().Add(runtime.ReadyBudget)); err == nil {
		t.Fatal("a stopped process is ready")
	}
	if waited := time.Since(start); waited > time.Second {
		t.Errorf("not ready after %s, want at once", waited)
	}
}

// A process that exits at once is never running, however its starts and
// the probes fall: a start counts once the process lived StartCheck (the
// agent's "starting" until monit's next cycle finds it). One that lives is
// ready after StartCheck, not before.
func TestAStartCountsOnceTheProcessLived(t *testing.T) {
	needRoot(t)
	defer func(c, s time.Duration) { runtime.MonitCycle, runtime.StartCheck = c, s }(runtime.MonitCycle, runtime.StartCheck)
	runtime.MonitCycle, runtime.StartCheck = 20*time.Millisecond, 2*time.Second
	run := func(script string) (runtime.Instance, *syncBuffer, func()) {
		vcap, _ := instanceDir(t, "web", "processes:\n- name: server\n  executable: JOBDIR/bin/run\n  workdir: JOBDIR\n",
			map[string]string{"run": script})
		var out syncBuffer
		plan := contract.Plan{Job: "web", Process: "server", Container: "web-server", Instance: contract.Instance{Containers: []string{"web-server"}}}
		l := launcher(vcap, plan, &out)
		ctx, stop := context.WithCancel(context.Background())
		done := runInBackground(t, ctx, l)
		return runtime.Instance{Plan: plan, State: l.State}, &out, func() { stop(); <-done }
	}
	in, out, stop := run("echo started; exit 1\n")
	for strings.Count(out.String(), "started") < 20 {
		if err := in.Ready(context.Background(), time.Now()); err == nil {
			t.Fatalf("ready after %d starts of a process that exits at once", strings.Count(out.String(), "started"))
		}
		if st := in.Status(true).Processes[0].State; st == contract.StateRunning {
			t.Fatalf("status %s for a process that exits at once", st)
		}
		time.Sleep(time.Millisecond)
	}
	stop()

	in, out, stop = run("echo started; exec sleep 60\n")
	defer stop()
	waitFor(t, "the start", func() bool { return strings.Contains(out.String(), "started") })
	if err := in.Ready(context.Background(), time.Now()); err == nil || !strings.Contains(err.Error(), "counts as running once it lived 2s") {
		t.Errorf("just started, the probe said %v", err)
	}
	if st := in.Status(true).Processes[0].State; st != contract.StateStarting {
		t.Errorf("just started, the status is %s, want starting", st)
	}
	start := time.Now()
	if err := in.Ready(context.Background(), time.Now().Add(runtime.ReadyBudget)); err != nil {
		t.Errorf("not ready within the probe's wait: %v", err)
	}
	if st := in.Status(true).Processes[0].State; st != contract.StateRunning {
		t.Errorf("after StartCheck (waited %s), the status is %s, want running", time.Since(start), st)
	}
}

// A process that exits is started again in its container on monit's next
// cycle, its pre_start hook before it as BPM runs it before every start;
// meanwhile it is failing, as monit reports it, and the container not
// ready: the kubelet sees no restart, the deploy no running instance. Its
// status says how many times it was started again, its last exit and the
// end of its stderr.
func TestLauncherStartsAnExitedProcessAgain(t *testing.T) {
	needRoot(t)
	vcap, _ := instanceDir(t, "web", "processes:\n- name: server\n  executable: JOBDIR/bin/run\n  workdir: JOBDIR\n  hooks: {pre_start: JOBDIR/bin/hook}\n",
		map[string]string{"hook": "echo hook ran\n", "run": "echo started; echo nats is not listening >&2; exit 3\n"})
	defer func(c time.Duration) { runtime.MonitCycle = c }(runtime.MonitCycle)
	runtime.MonitCycle = 300 * time.Millisecond
	var out syncBuffer
	plan := contract.Plan{Job: "web", Process: "server", Container: "web-server", Instance: contract.Instance{Containers: []string{"web-server"}}}
	l := launcher(vcap, plan, &out)
	ctx, stop := context.WithCancel(context.Background())
	done := runInBackground(t, ctx, l)
	in := runtime.Instance{Plan: plan, State: l.State}
	// The probe's answer now (deadline now), not after its wait for a start.
	var failing bool
	var probe string
	waitFor(t, "the third start", func() bool {
		if in.Status(true).Processes[0].State == contract.StateFailing {
			if err := in.Ready(context.Background(), time.Now()); err != nil {
				failing, probe = true, err.Error()
			}
		}
		return strings.Count(out.String(), "started") >= 3
	})
	select {
	case code := <-done:
		t.Fatalf("the launcher ended (exit code %d) when its process exited", code)
	default:
	}
	if got := strings.Count(out.String(), "hook ran"); got < 3 {
		t.Errorf("the hook ran %d times for 3 starts:\n%s", got, out.String())
	}
	if !failing {
		t.Errorf("never failing and not ready between starts")
	} else if want := "process 'server' of job 'web' is not running: it exited 3"; !strings.HasPrefix(probe, want) || strings.Contains(probe, "nats is not listening") {
		// The deploy's verdict quotes the probe's answer, never what the
		// process printed (the status has it, below).
		t.Errorf("the readiness probe said %q, want %q… without its stderr", probe, want)
	}
	ps := in.Status(true).Processes[0]
	if ps.Restarts < 2 || ps.LastExit == nil || ps.LastExit.Code != 3 || ps.LastExit.Signal != "" || ps.LastExit.Tail != "nats is not listening" {
		t.Errorf("status after the third start: %+v, last exit %+v; want 2 restarts or more, exit 3 with its stderr", ps, ps.LastExit)
	}
	stop()
	if code := <-done; code != 0 {
		t.Errorf("exit code %d after the stop", code)
	}
}

// An errand group's process runs once: its exit ends the launcher with
// its exit code, the errand's result, and its container.
func TestLauncherErrandProcessEnds(t *testing.T) {
	needRoot(t)
	vcap, _ := instanceDir(t, "smoke", "processes:\n- name: smoke\n  executable: JOBDIR/bin/run\n  workdir: JOBDIR\n",
		map[string]string{"run": "echo started; exit 3\n"})
	defer func(c time.Duration) { runtime.MonitCycle = c }(runtime.MonitCycle)
	runtime.MonitCycle = 10 * time.Millisecond
	var out syncBuffer
	l := launcher(vcap, contract.Plan{Job: "smoke", Process: "smoke", Container: "smoke-smoke", Instance: contract.Instance{Errand: true}}, &out)
	code, err := l.Run(context.Background())
	if code != 3 || err != nil {
		t.Errorf("got %d, %v; want 3, nil", code, err)
	}
	if n := strings.Count(out.String(), "started"); n != 1 {
		t.Errorf("started %d times:\n%s", n, out.String())
	}
}

// While an exited process waits for monit's next cycle, a stop of the
// instance runs its drain and post-stop at once and starts nothing until
// it is started; the kubelet's preStop hook (pre-stop and drain) keeps the
// process from being started again, and SIGTERM then ends the container
// at once, post-stop run.
func TestLauncherStopsWhileWaitingToStartAgain(t *testing.T) {
	needRoot(t)
	log := filepath.Join(t.TempDir(), "lifecycle")
	vcap, _ := instanceDir(t, "web", "processes:\n- name: server\n  executable: JOBDIR/bin/run\n  workdir: JOBDIR\n",
		map[string]string{"run": "echo started; exit 3\n", "drain": "echo drain >>" + log + "; echo 0\n", "post-stop": "echo post-stop >>" + log + "\n"})
	if err := os.Chmod(filepath.Dir(log), 0o777); err != nil {
		t.Fatal(err)
	}
	defer func(c time.Duration) { runtime.MonitCycle = c }(runtime.MonitCycle)
	runtime.MonitCycle = time.Hour
	desired := filepath.Join(vcap, "desired")
	want := func(state string) { write(t, filepath.Join(desired, contract.DesiredStateFile), state, 0o644) }
	want("")
	instance := contract.Instance{Containers: []string{"web-server"}, DrainSeconds: 30,
		Jobs: []contract.Job{{Name: "web", Scripts: []string{"drain", "post-stop"}, Host: "web-server"}}}
	plan := contract.Plan{Job: "web", Process: "server", Container: "web-server", Instance: instance}
	lifecycle := func() string { data, _ := os.ReadFile(log); return string(data) }
	state := func(l *runtime.Launcher) string {
		return runtime.Instance{Plan: plan, State: l.State}.Status(true).Processes[0].State
	}

	var out syncBuffer
	l := launcher(vcap, plan, &out)
	l.Desired = desired
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := runInBackground(t, ctx, l)
	waitFor(t, "the exit", func() bool { return strings.Contains(out.String(), "started") && state(l) == contract.StateFailing })
	want(names.DesiredStopped)
	waitFor(t, "the stop", func() bool { return state(l) == contract.StateStopped && lifecycle() == "drain\npost-stop\n" })
	runtime.MonitCycle = 10 * time.Millisecond
	want("")
	waitFor(t, "the start", func() bool { return strings.Count(out.String(), "started") >= 2 })
	cancel()
	<-done

	// The pod is deleted: its preStop hook drains while the process waits.
	runtime.MonitCycle = 300 * time.Millisecond
	out = syncBuffer{}
	_ = os.Remove(log)
	l = launcher(vcap, plan, &out)
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	done = runInBackground(t, ctx, l)
	waitFor(t, "the exit", func() bool { return strings.Contains(out.String(), "started") && state(l) == contract.StateFailing })
	in := runtime.Instance{Plan: plan, State: l.State, Log: logr.Discard(), Scripts: runtime.Scripts{VCAP: vcap, Out: &out, Err: &out}}
	if err := in.PreStop(context.Background()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * runtime.MonitCycle)
	if n := strings.Count(out.String(), "started"); n != 1 {
		t.Errorf("started %d times during the pod's stop:\n%s", n, out.String())
	}
	start := time.Now()
	cancel()
	if code := <-done; code != 0 {
		t.Errorf("exit code %d after SIGTERM", code)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("SIGTERM ended the container after %s", took)
	}
	if got := lifecycle(); got != "drain\npost-stop\n" {
		t.Errorf("lifecycle %q, want drain then post-stop", got)
	}
}

// limits.open_files above the container's hard limit (here above the
// kernel's nr_open, which no capability passes) is applied up to that
// limit, with a warning naming the field, not refused.
func TestSetLimitsUpToTheHardLimit(t *testing.T) {
	data, err := os.ReadFile("/proc/sys/fs/nr_open")
	if err != nil {
		t.Skip(err)
	}
	var nrOpen uint64
	if _, err := fmt.Sscan(string(data), &nrOpen); err != nil {
		t.Fatal(err)
	}
	var before syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &before); err != nil {
		t.Fatal(err)
	}
	want := nrOpen + 1
	warnings, err := runtime.SetLimits(&bpm.Limits{OpenFiles: &want})
	if err != nil {
		t.Fatal(err)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], fmt.Sprintf("limits.open_files %d ", want)) || !strings.HasSuffix(warnings[0], fmt.Sprintf("runs with %d", before.Max)) {
		t.Errorf("warnings %q", warnings)
	}
	var after syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &after); err != nil {
		t.Fatal(err)
	}
	if after.Cur != before.Max || after.Max != before.Max {
		t.Errorf("nofile %d %d, want %d %d", after.Cur, after.Max, before.Max, before.Max)
	}
}
