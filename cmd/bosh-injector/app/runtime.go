package app

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/bosh-injector/bosh-injector/gather/names"
	"github.com/bosh-injector/bosh-injector/inject/runtime"
	"github.com/bosh-injector/bosh-injector/inject/runtime/contract"
)

// runtimeOptions are where the in-pod commands find the BOSH directories.
type runtimeOptions struct {
	vcap     string
	stateDir string
	planDir  string
}

func (o *runtimeOptions) flags(cmd *cobra.Command) {
	cmd.Flags().StringVar(&o.vcap, "vcap", "/var/vcap", "root of the BOSH directories")
	cmd.Flags().StringVar(&o.stateDir, "state-dir", contract.StateDir, "the instance's shared lifecycle state")
	cmd.Flags().StringVar(&o.planDir, "plan-dir", contract.PlanDir, "where render wrote the instance's plan and the setup steps mark their end")
}

func (o *runtimeOptions) instance(cmd *cobra.Command, g *globalOptions) (runtime.Instance, error) {
	plan, err := contract.Load(o.planDir)
	if err != nil {
		return runtime.Instance{}, err
	}
	log, err := g.logger(cmd.ErrOrStderr())
	if err != nil {
		return runtime.Instance{}, err
	}
	return runtime.Instance{Plan: plan, State: runtime.State{Dir: o.stateDir}, Log: log,
		Scripts: runtime.Scripts{VCAP: o.vcap, Out: cmd.OutOrStdout(), Err: cmd.ErrOrStderr()}}, nil
}

func init() {
	register(execCommand)
	register(preStartCommand)
	register(preStopCommand)
	register(probeCommand)
}

// execCommand is `exec`, the process containers' entrypoint.
func execCommand(g *globalOptions) *cobra.Command {
	var o runtimeOptions
	var terminationLog string
	cmd := &cobra.Command{
		Use:   "exec",
		Short: "Run this container's BPM process as BPM does (the process containers' entrypoint)",
		Long: `exec reads the process from the job's rendered bpm.yml and runs it with BPM's
environment, working directory, limits and capabilities as vcap, its output in
/var/vcap/sys/log/<job>/<process>.stdout.log and .stderr.log and on the
container's output; on SIGTERM it sends the BPM shutdown signal, waits as BPM does,
then kills. The container hosting a job's scripts runs its post-start and post-stop.
A process of a job without bpm.yml runs through its monit file's start and stop
programs instead. It starts nothing before the instance's setup (render, the
pre-start steps, render's wait for the instance's own address) ended, as monit
starts nothing before the agent applied the jobs and ran their pre-start scripts.
While the pod's ` + names.AnnotationDesiredState + `
annotation (read from ` + contract.DesiredDir + `) is "stopped", the instance's
pre-stop and drain run once, the process stops and post-stop runs, and the
container stays until it is removed; back to started, the process and post-start
run again. The plan comes from ` + contract.EnvPlan + ` and the
instance's ` + contract.InstanceFile + `, which render writes in --plan-dir.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := contract.WaitSetup(cmd.Context(), o.planDir); err != nil {
				if cmd.Context().Err() != nil {
					// Stopped before it started: nothing to stop.
					return nil
				}
				return fail(cmd, terminationLog, err, 1)
			}
			in, err := o.instance(cmd, g)
			if err != nil {
				return fail(cmd, terminationLog, err, 1)
			}
			// As the container's init, it reaps the orphans of the
			// process tree; without the right it still runs the job.
			if stop, err := runtime.ReapOrphans(); err != nil {
				in.Log.Info("orphaned processes will not be reaped", "error", err.Error())
			} else {
				defer stop()
			}
			l := runtime.Launcher{Plan: in.Plan, VCAP: o.vcap, State: in.State, Out: cmd.OutOrStdout(), Err: cmd.ErrOrStderr(), Log: in.Log,
				StopTimeout: contract.BPMStopTimeout * time.Second, QuitGrace: contract.BPMQuitGrace * time.Second, PostStopWait: 10 * time.Second,
				Desired: contract.DesiredDir}
			run := l.Run
			if in.Plan.Monit {
				run = l.RunMonit
			}
			code, err := run(cmd.Context())
			if err != nil {
				return fail(cmd, terminationLog, err, 1)
			}
			if code != 0 {
				return exitError{code: code}
			}
			return nil
		},
	}
	o.flags(cmd)
	cmd.Flags().StringVar(&terminationLog, "termination-log", "/dev/termination-log", "file receiving the error on failure")
	return cmd
}

// preStartCommand is `pre-start`, which runs the jobs' pre-start scripts
// as a step of the instance's setup.
func preStartCommand(g *globalOptions) *cobra.Command {
	var o runtimeOptions
	var terminationLog string
	var step setupStep
	cmd := &cobra.Command{
		Use:   contract.PreStart + " JOB...",
		Short: "Run the jobs' bin/pre-start scripts at once, as the agent does (a pre-start step of the instance's setup)",
		Long: `pre-start waits for the render step, then runs /var/vcap/jobs/<job>/bin/pre-start of
every job named, all at once, as root with the job's BPM default environment, and
waits for all of them; output goes to /var/vcap/sys/log/<job>/pre-start.stdout.log
and .stderr.log and, each line prefixed with its job, to the container's output. If
any fails, the error names the failed jobs with their last output lines and goes to
the termination log too. Once all passed it marks --step done in --plan-dir, which
the launchers wait for. With --hold it then waits to be stopped (a container beside
the processes), and a restart in the same sandbox runs nothing again.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, jobs []string) error {
			// The container's init: the scripts' background children
			// are reaped here.
			if stop, err := runtime.ReapOrphans(); err == nil {
				defer stop()
			}
			step.planDir, step.terminationLog = o.planDir, terminationLog
			return step.run(cmd, func(ctx context.Context) error {
				if err := contract.WaitDone(ctx, o.planDir, contract.Rendered); err != nil {
					return err
				}
				s := runtime.Scripts{VCAP: o.vcap, Out: cmd.OutOrStdout(), Err: cmd.ErrOrStderr()}
				if err := s.PreStart(ctx, jobs); err != nil {
					return err
				}
				return contract.MarkDone(o.planDir, step.name)
			})
		},
	}
	o.flags(cmd)
	cmd.Flags().StringVar(&terminationLog, "termination-log", "/dev/termination-log", "file receiving the error on failure")
	cmd.Flags().StringVar(&step.name, "step", contract.PreStart, "the setup step this is, marked done in --plan-dir")
	step.flags(cmd)
	return cmd
}

// preStopCommand is `pre-stop`, the process containers' preStop hook.
func preStopCommand(g *globalOptions) *cobra.Command {
	var o runtimeOptions
	var deploymentDeleted bool
	cmd := &cobra.Command{
		Use:   "pre-stop",
		Short: "Run the instance's pre-stop and drain scripts once, before any process stops (the preStop hook)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			in, err := o.instance(cmd, g)
			if err != nil {
				return err
			}
			// `recreate --skip-drain` says so on the pod.
			_, in.SkipDrain = runtime.Desired(contract.DesiredDir)
			if deploymentDeleted {
				in.Scripts.NextState = runtime.DeleteEnv
			}
			return in.PreStop(cmd.Context())
		},
	}
	o.flags(cmd)
	cmd.Flags().BoolVar(&deploymentDeleted, "deployment-deleted", false, "tell pre-stop the instance and its deployment are deleted (delete-deployment runs it so in every process container)")
	return cmd
}

// probeCommand is `probe`, the process containers' readiness and liveness
// probe.
func probeCommand(g *globalOptions) *cobra.Command {
	var o runtimeOptions
	cmd := &cobra.Command{
		Use:       "probe ready|alive",
		Short:     "Readiness (process running, post-start done, dns/healthy) or liveness of this container",
		Args:      cobra.MatchAll(cobra.ExactArgs(1), cobra.OnlyValidArgs),
		ValidArgs: []string{"ready", "alive"},
		RunE: func(cmd *cobra.Command, args []string) error {
			load := func() (runtime.Instance, error) { return o.instance(cmd, g) }
			var err error
			if args[0] == "ready" {
				err = runtime.WaitReady(cmd.Context(), o.planDir, runtime.ReadyBudget, load)
			} else if in, lerr := load(); lerr != nil {
				err = lerr
			} else {
				err = in.Alive()
			}
			if err != nil {
				// The kubelet shows a probe's output in its event.
				fmt.Fprintln(cmd.OutOrStdout(), err)
				return exitError{code: 1}
			}
			return nil
		},
	}
	o.flags(cmd)
	return cmd
}

// setupStep is a step of the instance's setup (render, a pre-start) as
// its command runs it.
type setupStep struct {
	planDir, name, terminationLog string
	// hold: the container runs beside the processes; it waits to be
	// stopped once the step ended, and a restart in the same sandbox finds
	// it done.
	hold bool
	// serve: the container answers the pod's readiness probe, and its
	// process containers' from the launchers' files.
	serve bool
}

func (s *setupStep) flags(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&s.hold, "hold", false, "once the step ended, wait to be stopped (a container beside the processes)")
	cmd.Flags().BoolVar(&s.serve, "serve-setup", false, fmt.Sprintf("answer the pod's readiness probe at %s on port %d: ready once the whole setup ended", contract.SetupPath, contract.SetupPort))
}

// run runs work, unless a held step finds itself done in this sandbox
// already, serving the setup probe meanwhile; stopped, it ends quietly.
func (s *setupStep) run(cmd *cobra.Command, work func(context.Context) error) error {
	ctx := cmd.Context()
	served := make(chan error, 1)
	if s.serve {
		go func() { served <- runtime.ServeSetup(ctx, s.planDir, contract.SetupStateDir) }()
	}
	if !s.hold || !contract.Done(s.planDir, s.name) {
		if err := work(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fail(cmd, s.terminationLog, err, 1)
		}
	}
	if !s.hold {
		return nil
	}
	select {
	case <-ctx.Done():
	case err := <-served:
		if err != nil {
			return fail(cmd, s.terminationLog, err, 1)
		}
	}
	return nil
}

// installLauncher copies this binary to dir, for the process containers:
// dir is read-only there.
func installLauncher(dir string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	data, err := os.ReadFile(self)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp := dir + "/.bosh-injector.tmp"
	if err := os.WriteFile(tmp, data, 0o755); err != nil {
		return err
	}
	return os.Rename(tmp, dir+"/bosh-injector")
}
