package runtime

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr"

	"github.com/bosh-injector/bosh-injector/inject/runtime/contract"
)

// Instance is the lifecycle of the whole instance as seen from one process
// container: its preStop hook and its probes.
type Instance struct {
	Plan    contract.Plan
	Scripts Scripts
	State   State
	Log     logr.Logger
	// SkipDrain: a stop without the drain scripts (`bosh stop
	// --skip-drain`); they count as done.
	SkipDrain bool
	// Outside: the caller is not in the container (the setup server
	// answering its probe), so it cannot signal the process's pid: the pid
	// file, which the launcher removes when the process exits, is the
	// launcher's word.
	Outside bool
}

// PreStop is every process container's preStop hook. Before any process is
// signalled, the instance runs, as the agent's stop does, pre-stop of every
// job, then drain of every job; each script runs once, in the container
// hosting its job, and every hook returns only when all are done (or
// Plan.DrainSeconds passed), so the kubelet signals no process earlier.
func (in Instance) PreStop(ctx context.Context) error {
	// Every container's hook marks it: Claim, as Mark's renames race.
	if _, err := in.State.Claim(stoppingFile); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Duration(in.Plan.DrainSeconds)*time.Second)
	defer cancel()
	for _, script := range []string{contract.PreStop, contract.Drain} {
		var wg sync.WaitGroup
		for _, j := range in.Plan.Hosted() {
			if !j.Has(script) {
				continue
			}
			mine, err := in.State.Claim(claimFile(script, j.Name))
			if err != nil {
				return err
			}
			if !mine {
				continue
			}
			if script == contract.Drain && in.SkipDrain {
				in.Log.Info("drain skipped", "job", j.Name)
				_ = in.State.Mark(okFile(script, j.Name), "skipped")
				continue
			}
			wg.Go(func() {
				var err error
				if script == contract.PreStop {
					err = in.Scripts.PreStop(ctx, j.Name)
				} else {
					var rounds int
					rounds, err = in.Scripts.Drain(ctx, j.Name, in.Plan.PersistentDiskMB)
					in.Log.Info("drain done", "job", j.Name, "statusRounds", rounds)
				}
				if err != nil {
					in.Log.Info(script+" failed", "job", j.Name, "error", err.Error())
					_ = in.State.Mark(failedFile(script, j.Name), failureRecord(err, ""))
				}
				// Waiters look for the ok file: a failure does not hold the
				// instance's stop back (the pod is going).
				_ = in.State.Mark(okFile(script, j.Name), errText(err))
			})
		}
		wg.Wait()
		var all []string
		for _, j := range in.Plan.Jobs {
			if j.Has(script) {
				all = append(all, okFile(script, j.Name))
			}
		}
		if missing := in.State.WaitAll(ctx, all); len(missing) > 0 {
			return fmt.Errorf("%s not done within %ds: %s", script, in.Plan.DrainSeconds, strings.Join(missing, ", "))
		}
	}
	return nil
}

// Alive says whether the container's process runs, or is being started
// (BPM's pre_start hook, a monit start program).
func (in Instance) Alive() error {
	if _, starting := in.State.Read(startingFile(in.Plan.Container)); starting {
		return nil
	}
	return in.running()
}

// running says whether the container's process runs.
func (in Instance) running() error {
	raw, ok := in.State.Read(pidFile(in.Plan.Container))
	if !ok {
		return in.notRunning()
	}
	if in.Outside {
		return nil
	}
	pid, err := strconv.Atoi(raw)
	if err != nil {
		return fmt.Errorf("pid file of %s: %w", in.Plan.Container, err)
	}
	if err := syscall.Kill(pid, 0); err != nil {
		return fmt.Errorf("process '%s' of job '%s' (pid %d) is not running: %w", in.Plan.Process, in.Plan.Job, pid, err)
	}
	return nil
}

// StartCheck is how long a started process must live before it counts as
// running. Monit reports a service it started "initializing" (the agent:
// "starting") until a later cycle finds its process; a process that exits
// at once, failing, is never running, so no deploy takes it for running.
var StartCheck = 2 * time.Second

// confirmed says whether the container's process runs and has lived
// through StartCheck.
func (in Instance) confirmed() error {
	if err := in.running(); err != nil {
		return err
	}
	age, ok := in.State.Age(pidFile(in.Plan.Container))
	switch {
	case !ok:
		// Its pid file went since: it exited.
		return in.notRunning()
	case age < StartCheck:
		return fmt.Errorf("process '%s' of job '%s' started %s ago: it counts as running once it lived %s%s", in.Plan.Process, in.Plan.Job, age.Round(time.Millisecond), StartCheck, in.lastExit())
	}
	return nil
}

// notRunning is the error of a process that does not run.
func (in Instance) notRunning() error {
	return fmt.Errorf("process '%s' of job '%s' is not running%s", in.Plan.Process, in.Plan.Job, in.lastExit())
}

// ReadyBudget is how long a readiness answer waits, within the probe's
// 10 s timeout, for what is still starting: the setup, the process's start
// check, post-starts. The kubelet probes a container as soon as it sees it
// running, and a probe failing then runs again only a period (5 s) later.
const ReadyBudget = 8 * time.Second

// WaitReady answers a readiness probe: it waits, within budget
// (ReadyBudget for the kubelet), for the instance's setup in planDir, then
// for the readiness of the container load returns once the setup ended
// (its plan may not be there before).
func WaitReady(ctx context.Context, planDir string, budget time.Duration, load func() (Instance, error)) error {
	deadline := time.Now().Add(budget)
	setupCtx, cancel := context.WithDeadline(ctx, deadline)
	err := contract.WaitSetup(setupCtx, planDir)
	cancel()
	if err != nil {
		return err
	}
	in, err := load()
	if err != nil {
		return err
	}
	return in.Ready(ctx, deadline)
}

// Ready is the agent's view of a healthy instance, for this container: its
// process runs, every job's post-start succeeded, and the bin/dns/healthy
// of the jobs it hosts succeeds. What is still starting is waited for
// until deadline. A failed post-start is named with its exit, never with
// what it printed (see lastExit).
func (in Instance) Ready(ctx context.Context, deadline time.Time) error {
	for {
		final, err := in.started()
		if err == nil {
			break
		}
		if final || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(readyPoll):
		}
	}
	if !contract.ChecksDNSHealth(in.Plan.Jobs, in.Plan.Container) {
		return nil
	}
	// The checks run as the user of the container's process.
	p, err := LoadProcess(in.Scripts.VCAP, in.Plan.Job, in.Plan.Process)
	if err != nil {
		return err
	}
	for _, j := range in.Plan.Hosted() {
		if j.Has(contract.DNSHealthy) {
			if err := in.Scripts.DNSHealthy(ctx, j.Name, processUID(p)); err != nil {
				return err
			}
		}
	}
	return nil
}

// readyPoll is how often Ready looks again at what is starting.
const readyPoll = 50 * time.Millisecond

// started says whether the process runs (confirmed) and every job's post-start
// succeeded; final when the answer cannot change by waiting (a post-start
// failed, the process stopped on request).
func (in Instance) started() (final bool, err error) {
	if err := in.confirmed(); err != nil {
		// A process stopped on request stays stopped until a start: the
		// answer is now, so that the pod leaves its Services' endpoints
		// within the probe's failures, not a wait longer each.
		_, stopped := in.State.Read(stoppedFile(in.Plan.Container))
		return stopped, err
	}
	for _, j := range in.Plan.Jobs {
		if !j.Has(contract.PostStart) {
			continue
		}
		if record, failed := in.State.Read(failedFile(contract.PostStart, j.Name)); failed {
			return true, Failed(failure(record, false))
		}
		if _, ok := in.State.Read(okFile(contract.PostStart, j.Name)); !ok {
			return false, fmt.Errorf("post-start of job '%s' has not finished", j.Name)
		}
	}
	return false, nil
}

// Failed is a readiness failure no waiting ends: a post-start failed.
type Failed string

func (f Failed) Error() string { return string(f) }

// failure is what a failure record says: the script's error, and with
// output the end of what it printed.
func failure(record string, output bool) string {
	msg, printed, _ := strings.Cut(record, "\n")
	if printed == "" || !output {
		return msg
	}
	return msg + ": " + printed
}
