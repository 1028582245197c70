package runtime

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/bosh-injector/bosh-injector/inject/runtime/monit"
)

// RunMonit runs a process of a job without bpm.yml as monit does: the
// rendered monit file's start program (as root), then it watches the
// pidfile; when the process is gone the launcher exits, so the kubelet
// starts it again, as monit would. When ctx ends the stop program runs and
// the launcher waits (as long as BPM would) for the process to go.
func (l *Launcher) RunMonit(ctx context.Context) (int, error) {
	plan := l.Plan
	file := filepath.Join(l.VCAP, "jobs", plan.Job, "monit")
	data, err := os.ReadFile(file)
	if err != nil {
		return 1, fmt.Errorf("job '%s': %w", plan.Job, err)
	}
	p, err := monit.Parse(string(data), plan.Process)
	if err != nil {
		return 1, fmt.Errorf("job '%s', %s: %w", plan.Job, file, err)
	}
	for _, d := range []string{"log", "run"} {
		if err := os.MkdirAll(filepath.Join(l.VCAP, "sys", d, plan.Job), 0o755); err != nil {
			return 1, err
		}
	}
	// Alive while the start program runs and the pidfile is awaited.
	if err := l.State.Mark(startingFile(plan.Container), ""); err != nil {
		return 1, err
	}
	defer func() { _ = l.State.Remove(startingFile(plan.Container)) }()
	if code, stop, err := l.beforeStart(ctx); stop {
		return code, err
	}
	if err := l.program(ctx, "start", p.Start); err != nil {
		return 1, err
	}
	pid, err := l.waitPidfile(ctx, p.Pidfile)
	if err != nil {
		return 1, err
	}
	l.Log.Info("started", "job", plan.Job, "process", plan.Process, "pid", pid)
	if err := l.State.Mark(pidFile(plan.Container), strconv.Itoa(pid)); err != nil {
		return 1, err
	}
	_ = l.State.Remove(startingFile(plan.Container))
	scripts := Scripts{VCAP: l.VCAP, Out: l.Out, Err: l.Err}
	postStartCtx, cancelPostStart := context.WithCancel(ctx)
	defer cancelPostStart()
	go l.postStart(postStartCtx, scripts)

	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for alive(pid) {
		select {
		case <-ctx.Done():
			cancelPostStart()
			code := 0
			if err := l.program(context.Background(), "stop", p.Stop); err != nil {
				l.Log.Info("stop program failed", "job", plan.Job, "process", plan.Process, "error", err.Error())
			}
			deadline := time.Now().Add(l.StopTimeout + l.QuitGrace)
			for alive(pid) && time.Now().Before(deadline) {
				time.Sleep(pollInterval)
			}
			if alive(pid) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
				code = 128 + int(syscall.SIGKILL)
			}
			l.Log.Info("stopped", "job", plan.Job, "process", plan.Process)
			_ = l.State.Remove(pidFile(plan.Container))
			_ = l.State.Mark(stoppedFile(plan.Container), "")
			l.postStop(scripts)
			return code, nil
		case <-tick.C:
		}
	}
	_ = l.State.Remove(pidFile(plan.Container))
	l.Log.Info("exited", "job", plan.Job, "process", plan.Process)
	return 1, nil
}

// program runs a monit start or stop program as monit does: as root, with
// a plain environment, its output on the container's.
func (l *Launcher) program(ctx context.Context, what, command string) error {
	fields := strings.Fields(command)
	if len(fields) == 0 {
		return fmt.Errorf("job '%s', process '%s': empty %s program", l.Plan.Job, l.Plan.Process, what)
	}
	cmd := exec.CommandContext(ctx, fields[0], fields[1:]...)
	cmd.Env = []string{"PATH=/bin:/usr/bin:/sbin:/usr/sbin"}
	cmd.Stdout, cmd.Stderr = l.Out, l.Err
	cmd.WaitDelay = time.Second
	if err := runChild(cmd); err != nil {
		return fmt.Errorf("job '%s', process '%s': %s program %q: %w", l.Plan.Job, l.Plan.Process, what, command, err)
	}
	return nil
}

// waitPidfile waits (as monit's default start timeout, 30 s) for the
// pidfile to name a running process.
func (l *Launcher) waitPidfile(ctx context.Context, file string) (int, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		if data, err := os.ReadFile(file); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(data))); err == nil && alive(pid) {
				return pid, nil
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return 0, fmt.Errorf("job '%s', process '%s': no running process in %s after the start program", l.Plan.Job, l.Plan.Process, file)
		}
		time.Sleep(pollInterval)
	}
}

// alive says whether pid runs. The launcher is the container's init, so a
// daemon the start program left behind is its child once it dies: reap it.
func alive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name.
	if i := strings.LastIndexByte(string(stat), ')'); i >= 0 && strings.HasPrefix(string(stat[i+1:]), " Z") {
		var ws syscall.WaitStatus
		_, _ = syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
		return false
	}
	return true
}
