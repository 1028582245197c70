package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/sys/unix"

	"github.com/bosh-injector/bosh-injector/gather/model/bpm"
	"github.com/bosh-injector/bosh-injector/gather/names"
	"github.com/bosh-injector/bosh-injector/inject/runtime/contract"
)

// VcapUID is the user BPM runs processes as.
const VcapUID = 1000

// Launcher runs one BPM process in its container as BPM does: limits as
// rlimits, vcap with the configured capabilities ambient, output to the BPM
// log files and the container's own output, the shutdown signal then BPM's
// wait on termination. The launcher of the container hosting a job's
// scripts also runs its post-start (once every process of the instance
// runs) and post-stop (once every process stopped).
type Launcher struct {
	Plan contract.Plan
	// VCAP is /var/vcap (a temporary directory in tests).
	VCAP  string
	State State
	// Out and Err are the container's stdout and stderr.
	Out, Err io.Writer
	Log      logr.Logger
	// StopTimeout and QuitGrace are BPM's waits after the shutdown signal
	// and after SIGQUIT.
	StopTimeout, QuitGrace time.Duration
	// PostStopWait bounds the wait for the instance's other processes to
	// stop before post-stop runs.
	PostStopWait time.Duration
	// Desired is where the pod's desired state is (contract.DesiredDir);
	// "" runs the process whatever it says.
	Desired string
}

// LoadProcess reads the process's configuration from the job's rendered
// bpm.yml, with BPM's validation and defaults.
func LoadProcess(vcap, job, process string) (bpm.Process, error) {
	file := filepath.Join(vcap, "jobs", job, "config", "bpm.yml")
	data, err := os.ReadFile(file)
	if err != nil {
		return bpm.Process{}, fmt.Errorf("job '%s': %w", job, err)
	}
	cfg, err := bpm.Parse(data, job)
	if err != nil {
		return bpm.Process{}, fmt.Errorf("job '%s', %s: %w", job, file, err)
	}
	for _, p := range cfg.Processes {
		if p.Name == process {
			return p, nil
		}
	}
	return bpm.Process{}, fmt.Errorf("job '%s': %s has no process '%s'", job, file, process)
}

// processUID is the user BPM runs p as: vcap, or root when privileged.
func processUID(p bpm.Process) int {
	if p.Privileged() {
		return 0
	}
	return VcapUID
}

// Run runs the process until it exits or ctx ends (the container is asked
// to stop), and returns the exit code for the container.
func (l *Launcher) Run(ctx context.Context) (int, error) {
	plan := l.Plan
	// A pid file left by the container's previous run names no process:
	// the setup server's probe would take it for running.
	_ = l.State.Remove(pidFile(plan.Container))
	p, err := LoadProcess(l.VCAP, plan.Job, plan.Process)
	if err != nil {
		return 1, err
	}
	privileged := p.Privileged()
	stdout, stderr, err := l.prepare(p, processUID(p))
	if err != nil {
		return 1, fmt.Errorf("job '%s', process '%s': failed to create system files: %w", plan.Job, plan.Process, err)
	}
	defer stdout.Close()
	defer stderr.Close()
	// The end of stderr goes into the exit's record, for the status.
	tail := &tailBuffer{}
	outW, errW := io.MultiWriter(stdout, l.Out), io.MultiWriter(stderr, l.Err, tail)
	warnings, err := SetLimits(p.Limits)
	for _, w := range warnings {
		// On the container's output and in the job's stderr log, where
		// `logs` finds it.
		fmt.Fprintf(errW, "bosh-injector: warning: job '%s', process '%s': %s\n", plan.Job, plan.Process, w)
	}
	if err != nil {
		return 1, fmt.Errorf("job '%s', process '%s': %w", plan.Job, plan.Process, err)
	}
	env := Environ(p)
	// A container that stopped before (a stop, or a restart while stopped)
	// starts as after the agent's start.
	_, stoppedBefore := l.State.Read(stoppedFile(plan.Container))
	// The exits of a previous container are the kubelet's to tell.
	_ = l.State.Remove(exitedFile(plan.Container))
	restarts := 0
	for {
		if stopped, _ := l.wantStopped(); stopped || stoppedBefore {
			if !l.stayStopped(ctx) {
				return 0, nil
			}
			l.forgetStop()
			restarts = 0
		}
		tail.Reset()
		exit, stopped, err := l.runProcess(ctx, p, env, outW, errW, privileged)
		if stopped {
			stoppedBefore = true
			continue
		}
		if ctx.Err() != nil && err != nil {
			// Stopped while starting (its hook ended): nothing ran.
			_ = l.State.Remove(pidFile(plan.Container))
			return 0, nil
		}
		if ctx.Err() != nil || plan.Errand {
			_ = l.State.Remove(pidFile(plan.Container))
			return exit.Code, err
		}
		exit.Tail = tail.Lines()
		if err != nil {
			// bpm start failed: monit tries again on its next cycle too.
			l.Log.Info("failed to start", "job", plan.Job, "process", plan.Process, "error", err.Error())
			exit.Tail = strings.TrimSpace(exit.Tail + "\n" + err.Error())
		}
		l.recordExit(restarts, exit)
		again, stopped := l.awaitMonitCycle(ctx)
		if !again && !stopped {
			return 0, nil
		}
		if again {
			restarts++
			l.recordExit(restarts, exit)
		}
		stoppedBefore = stopped
	}
}

// recordExit records, for the status, the process's last exit and how many
// times it was started again in its container.
func (l *Launcher) recordExit(restarts int, exit contract.Exit) {
	data, _ := json.Marshal(exitRecord{Restarts: restarts, LastExit: exit})
	if err := l.State.Mark(exitedFile(l.Plan.Container), string(data)); err != nil {
		l.Log.Error(err, "recording the exit")
	}
}

// MonitCycle is the agent's monit cycle (the stemcell's monitrc `set daemon
// 10`): monit starts a process it finds not running again on its next
// cycle.
var MonitCycle = 10 * time.Second

// awaitMonitCycle waits, after the process of a service instance exited,
// for monit's next cycle, which starts it again: in its container, so
// releases whose processes exit until a peer is up (nats-tls's healthcheck,
// route_registrar before NATS listens) come up without container restarts.
// Meanwhile the process is failing (no pid, not starting), as monit
// reports it, and the container not ready. It is not started again while
// the instance is being stopped (the agent unmonitors before pre-stop and
// drain, which may end the process themselves): a stop of the instance
// runs its scripts here as runProcess does (stopped), and the end of ctx
// (the container is stopped) runs post-stop; again is false then.
func (l *Launcher) awaitMonitCycle(ctx context.Context) (again, stopped bool) {
	plan := l.Plan
	_ = l.State.Remove(pidFile(plan.Container))
	l.Log.Info("starting again on monit's next cycle", "job", plan.Job, "process", plan.Process, "in", MonitCycle.String())
	waitCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	stopRequested := l.stopRequested(waitCtx)
	cycle := time.After(MonitCycle)
	for {
		select {
		case <-ctx.Done():
			l.recordStop(Scripts{VCAP: l.VCAP, Out: l.Out, Err: l.Err})
			return false, false
		case skipDrain := <-stopRequested:
			l.drain(ctx, skipDrain)
			l.recordStop(Scripts{VCAP: l.VCAP, Out: l.Out, Err: l.Err})
			return false, true
		case <-cycle:
			if _, stopping := l.State.Read(stoppingFile); !stopping {
				return true, false
			}
			// Stopping: the stop request or ctx ends the wait.
			cycle = nil
		}
	}
}

// runProcess starts the process and waits until it exits, ctx ends (the
// container is asked to stop) or its instance is stopped (stopped: then
// it ran pre-stop, drain, the stop and post-stop as the agent's stop does,
// and the container stays).
func (l *Launcher) runProcess(ctx context.Context, p bpm.Process, env []string, outW, errW io.Writer, privileged bool) (exit contract.Exit, stopped bool, err error) {
	plan := l.Plan
	failed := contract.Exit{Code: 1}
	// Alive while the hook runs: a slow pre_start must not look dead.
	if err := l.State.Mark(startingFile(plan.Container), ""); err != nil {
		return failed, false, err
	}
	defer func() { _ = l.State.Remove(startingFile(plan.Container)) }()

	// BPM runs the pre_start hook as root, with the process's environment
	// and output, before every start.
	if p.Hooks != nil && p.Hooks.PreStart != "" {
		hook := exec.CommandContext(ctx, p.Hooks.PreStart)
		hook.Env, hook.Stdout, hook.Stderr = env, outW, errW
		if err := runChild(hook); err != nil {
			return failed, false, fmt.Errorf("job '%s', process '%s': prestart hook failed: %w", plan.Job, plan.Process, err)
		}
	}

	cmd := exec.Command(p.Executable, p.Args...)
	cmd.Env, cmd.Dir, cmd.Stdout, cmd.Stderr = env, p.Workdir, outW, errW
	cmd.WaitDelay = time.Second
	if !privileged {
		attr, err := credentials(p.Capabilities)
		if err != nil {
			return failed, false, fmt.Errorf("job '%s', process '%s': %w", plan.Job, plan.Process, err)
		}
		cmd.SysProcAttr = attr
	}
	if err := startChild(cmd); err != nil {
		return failed, false, fmt.Errorf("job '%s', process '%s': %w", plan.Job, plan.Process, err)
	}
	l.Log.Info("started", "job", plan.Job, "process", plan.Process, "pid", cmd.Process.Pid)
	if err := l.State.Mark(pidFile(plan.Container), fmt.Sprint(cmd.Process.Pid)); err != nil {
		return failed, false, err
	}
	_ = l.State.Remove(startingFile(plan.Container))
	done := make(chan error, 1)
	go func() { done <- waitChild(cmd) }()

	scripts := Scripts{VCAP: l.VCAP, Out: l.Out, Err: l.Err}
	postStartCtx, cancelPostStart := context.WithCancel(ctx)
	defer cancelPostStart()
	go l.postStart(postStartCtx, scripts)

	select {
	case err := <-done:
		// Like monit, a process that exits is started again (Run, on
		// monit's next cycle); post-stop is not run.
		l.Log.Info("exited", "job", plan.Job, "process", plan.Process, "error", errText(err))
		return exitOf(cmd, err), false, nil
	case skipDrain := <-l.stopRequested(postStartCtx):
		cancelPostStart()
		l.drain(ctx, skipDrain)
		stopped = true
	case <-ctx.Done():
	}
	cancelPostStart()
	exit.Code = l.stop(cmd, shutdownSignal(p), done)
	l.recordStop(scripts)
	return exit, stopped, nil
}

// drain runs the instance's pre-stop and drain scripts as the agent's stop
// does, before the process is stopped.
func (l *Launcher) drain(ctx context.Context, skipDrain bool) {
	plan := l.Plan
	l.Log.Info("stopping the instance", "job", plan.Job, "process", plan.Process, "skipDrain", skipDrain)
	in := Instance{Plan: plan, State: l.State, Log: l.Log, SkipDrain: skipDrain,
		Scripts: Scripts{VCAP: l.VCAP, Out: l.Out, Err: l.Err, NextState: StopEnv}}
	if err := in.PreStop(ctx); err != nil {
		l.Log.Info("pre-stop and drain did not finish", "error", err.Error())
	}
}

// recordStop records the process stopped and runs post-stop of the jobs
// this container hosts.
func (l *Launcher) recordStop(scripts Scripts) {
	_ = l.State.Remove(pidFile(l.Plan.Container))
	if err := l.State.Mark(stoppedFile(l.Plan.Container), ""); err != nil {
		l.Log.Error(err, "recording the stop")
	}
	l.postStop(scripts)
}

// wantStopped reads the instance's desired state.
func (l *Launcher) wantStopped() (stopped, skipDrain bool) {
	if l.Desired == "" {
		return false, false
	}
	return Desired(l.Desired)
}

// Desired reads the instance's desired state from the pod's annotations
// in dir (contract.DesiredDir): stopped, and whether without drain.
func Desired(dir string) (stopped, skipDrain bool) {
	state, _ := os.ReadFile(filepath.Join(dir, contract.DesiredStateFile))
	skip, _ := os.ReadFile(filepath.Join(dir, contract.SkipDrainFile))
	return strings.TrimSpace(string(state)) == names.DesiredStopped, strings.TrimSpace(string(skip)) == "true"
}

// stopRequested delivers once the instance is to stop (whether without
// drain), until ctx ends.
func (l *Launcher) stopRequested(ctx context.Context) <-chan bool {
	ch := make(chan bool, 1)
	go func() {
		for {
			if stopped, skip := l.wantStopped(); stopped {
				ch <- skip
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(pollInterval):
			}
		}
	}()
	return ch
}

// stayStopped keeps the process stopped until the instance is started
// again, across restarts of the container; false when ctx ended first.
func (l *Launcher) stayStopped(ctx context.Context) bool {
	plan := l.Plan
	_ = l.State.Remove(pidFile(plan.Container))
	if err := l.State.Mark(stoppedFile(plan.Container), ""); err != nil {
		l.Log.Error(err, "recording the stop")
	}
	if stopped, _ := l.wantStopped(); stopped {
		l.Log.Info("stopped until started", "job", plan.Job, "process", plan.Process)
	}
	for {
		if stopped, _ := l.wantStopped(); !stopped {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(pollInterval):
		}
	}
}

// forgetStop is the start after a stop: it forgets the stop's scripts (so
// the next stop or the pod's deletion drains again) and the post-start
// results of the jobs this container hosts (so post-start runs again, as
// after the agent's start).
func (l *Launcher) forgetStop() {
	plan := l.Plan
	for _, j := range plan.Hosted() {
		for _, script := range []string{contract.PreStop, contract.Drain, contract.PostStart} {
			_ = l.State.Remove(claimFile(script, j.Name))
			_ = l.State.Remove(okFile(script, j.Name))
			_ = l.State.Remove(failedFile(script, j.Name))
		}
	}
	_ = l.State.Remove(stoppedFile(plan.Container))
	_ = l.State.Remove(stoppingFile)
	_ = l.State.Remove(exitedFile(plan.Container))
	l.Log.Info("starting after a stop", "job", plan.Job, "process", plan.Process)
}

// stop sends the shutdown signal and waits as BPM does (StopTimeout, then
// SIGQUIT and QuitGrace), then kills the process.
func (l *Launcher) stop(cmd *exec.Cmd, sig syscall.Signal, done <-chan error) int {
	plan := l.Plan
	l.Log.Info("stopping", "job", plan.Job, "process", plan.Process, "signal", sig.String())
	_ = cmd.Process.Signal(sig)
	for _, step := range []struct {
		wait time.Duration
		next syscall.Signal
	}{{l.StopTimeout, syscall.SIGQUIT}, {l.QuitGrace, syscall.SIGKILL}} {
		select {
		case err := <-done:
			l.Log.Info("stopped", "job", plan.Job, "process", plan.Process, "error", errText(err))
			return 0
		case <-time.After(step.wait):
			l.Log.Info("still running, sending "+step.next.String(), "job", plan.Job, "process", plan.Process)
			_ = cmd.Process.Signal(step.next)
		}
	}
	<-done
	return 128 + int(syscall.SIGKILL)
}

// postStart runs post-start of the jobs this container hosts once every
// process container of the instance runs its process; a job whose
// post-start succeeded before (the container restarted) is not run again,
// as monit restarts do not run it.
func (l *Launcher) postStart(ctx context.Context, scripts Scripts) {
	var jobs []string
	for _, j := range l.Plan.Hosted() {
		if j.Has(contract.PostStart) {
			if _, ok := l.State.Read(okFile(contract.PostStart, j.Name)); !ok {
				jobs = append(jobs, j.Name)
			}
		}
	}
	if len(jobs) == 0 {
		return
	}
	var pids []string
	for _, c := range l.Plan.Containers {
		pids = append(pids, pidFile(c))
	}
	if missing := l.State.WaitAll(ctx, pids); len(missing) > 0 {
		return
	}
	for _, job := range jobs {
		_ = l.State.Remove(failedFile(contract.PostStart, job))
		tail, err := scripts.PostStart(ctx, job)
		if err != nil {
			l.Log.Info("post-start failed", "job", job, "output", tail)
			_ = l.State.Mark(failedFile(contract.PostStart, job), failureRecord(err, tail))
			continue
		}
		l.Log.Info("post-start succeeded", "job", job)
		_ = l.State.Mark(okFile(contract.PostStart, job), "")
	}
}

// postStop runs post-stop of the jobs this container hosts once every
// process of the instance stopped (or PostStopWait passed).
func (l *Launcher) postStop(scripts Scripts) {
	var jobs []string
	for _, j := range l.Plan.Hosted() {
		if j.Has(contract.PostStop) {
			jobs = append(jobs, j.Name)
		}
	}
	if len(jobs) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), l.PostStopWait)
	defer cancel()
	for {
		running := slices.ContainsFunc(l.Plan.Containers, func(c string) bool {
			_, ok := l.State.Read(pidFile(c))
			return ok
		})
		if !running || ctx.Err() != nil {
			break
		}
		time.Sleep(pollInterval)
	}
	for _, job := range jobs {
		if err := scripts.PostStop(context.Background(), job); err != nil {
			l.Log.Info("post-stop failed", "job", job, "error", err.Error())
			continue
		}
		l.Log.Info("post-stop succeeded", "job", job)
	}
}

// prepare creates what BPM creates before a start: the job's log, run, tmp
// (and data or store when asked) directories and additional volumes, owned
// by the process's user, and opens the process's log files for appending.
func (l *Launcher) prepare(p bpm.Process, uid int) (*os.File, *os.File, error) {
	job := l.Plan.Job
	dirs := []string{
		filepath.Join(l.VCAP, "sys", "log", job),
		filepath.Join(l.VCAP, "sys", "run", job),
		filepath.Join(l.VCAP, "data", job, "tmp"),
	}
	if p.EphemeralDisk {
		dirs = append(dirs, filepath.Join(l.VCAP, "data", job))
	}
	if p.PersistentDisk {
		dirs = append(dirs, filepath.Join(l.VCAP, "store", job))
	}
	for _, v := range p.AdditionalVolumes {
		if !v.MountOnly {
			dirs = append(dirs, filepath.Join(l.VCAP, strings.TrimPrefix(v.Path, "/var/vcap/")))
		}
	}
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, nil, err
		}
		if err := chown(d, uid); err != nil {
			return nil, nil, err
		}
	}
	var files []*os.File
	for _, stream := range []string{"stdout", "stderr"} {
		path := filepath.Join(l.VCAP, "sys", "log", job, p.Name+"."+stream+".log")
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			return nil, nil, err
		}
		if err := chown(path, uid); err != nil {
			return nil, nil, err
		}
		files = append(files, f)
	}
	return files[0], files[1], nil
}

// chown gives path to uid, when the launcher may (it runs as root in a
// pod; tests may run it as anyone).
func chown(path string, uid int) error {
	if os.Geteuid() != 0 {
		return nil
	}
	return os.Chown(path, uid, uid)
}

// Environ is the process's environment: bpm.yml's env with BPM's defaults
// (bpm.Parse applied them), sorted.
func Environ(p bpm.Process) []string {
	var env []string
	for _, k := range slices.Sorted(maps.Keys(p.Env)) {
		env = append(env, k+"="+p.Env[k])
	}
	return env
}

func shutdownSignal(p bpm.Process) syscall.Signal {
	if p.ShutdownSignal == "INT" {
		return syscall.SIGINT
	}
	return syscall.SIGTERM
}

func exitCode(cmd *exec.Cmd, err error) int { return exitOf(cmd, err).Code }

// exitOf is how cmd ended, waited with err.
func exitOf(cmd *exec.Cmd, err error) contract.Exit {
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return contract.Exit{Code: 128 + int(ws.Signal()), Signal: unix.SignalName(ws.Signal())}
		}
		return contract.Exit{Code: exit.ExitCode()}
	}
	if err != nil {
		return contract.Exit{Code: 1}
	}
	return contract.Exit{Code: cmd.ProcessState.ExitCode()}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
