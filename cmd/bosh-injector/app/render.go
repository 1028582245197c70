package app

import (
	"context"
	"time"

	"github.com/spf13/cobra"

	"github.com/bosh-injector/bosh-injector/gather/render/rendering"
	"github.com/bosh-injector/bosh-injector/gather/render/resolved"
	"github.com/bosh-injector/bosh-injector/inject/runtime/contract"
)

func init() {
	register(func(g *globalOptions) *cobra.Command {
		var cfg rendering.Config
		var terminationLog, launcherDir, instance, planDir string
		var step setupStep
		cmd := &cobra.Command{
			Use:   "render",
			Short: "Render the BOSH jobs of this pod's instance (the render step of its setup)",
			Long: `render takes the pod's instance from the environment the webhook sets
(` + contract.EnvIndex + `, ` + contract.EnvPodIP + `, ` + contract.EnvNamespace + `), reads the mounted
ig-resolved Secret and the release images' jobs, and renders every template of
every job into /var/vcap/jobs in one Ruby process, installs the launcher
(--install-launcher) where the jobs are copied, writes the process containers'
shared plan (--instance) in --plan-dir, and marks the render step done there for
this pod's sandbox. It then waits (--address-wait) for the instance's address to
resolve to the pod's IP, as a VM's DNS record exists before its jobs start, and
marks that done too: pre-start waits for the first mark, the launchers and the
pod's readiness for both. With --hold (a container beside the processes) it
marks the render step done before the address wait, so pre-start runs
meanwhile, and waits to be stopped; a restart in the same sandbox renders
nothing again.`,
			Args: cobra.NoArgs,
			PreRunE: func(cmd *cobra.Command, _ []string) error {
				return flagsFromEnv(cmd)
			},
			RunE: func(cmd *cobra.Command, _ []string) error {
				// Held, the step is whole once its last mark is written.
				step.planDir, step.name, step.terminationLog = planDir, contract.Addressed, terminationLog
				return step.run(cmd, func(ctx context.Context) error {
					done := func() error {
						if launcherDir != "" {
							if err := installLauncher(launcherDir); err != nil {
								return err
							}
						}
						if instance != "" {
							if err := contract.WriteInstance(planDir, instance); err != nil {
								return err
							}
						}
						return contract.MarkDone(planDir, contract.Rendered)
					}
					c, err := rendering.ConfigFromEnv(cfg)
					if err != nil {
						return err
					}
					if c.Log, err = g.logger(cmd.ErrOrStderr()); err != nil {
						return err
					}
					if step.hold {
						c.Rendered = func(string) error { return done() }
					}
					if err := rendering.Run(ctx, c); err != nil {
						return err
					}
					if !step.hold {
						if err := done(); err != nil {
							return err
						}
					}
					return contract.MarkDone(planDir, contract.Addressed)
				})
			},
		}
		f := cmd.Flags()
		f.StringVar(&cfg.ResolvedFile, "resolved", "/var/vcap/bosh-injector/resolved/"+resolved.Key, "the mounted ig-resolved Secret's data file")
		f.StringVar(&cfg.JobsSrc, "jobs-src", "/var/vcap/all-releases/jobs-src", "jobs copied from the release images")
		f.StringVar(&cfg.VCAP, "vcap", "/var/vcap", "root of the BOSH directories")
		f.DurationVar(&cfg.AddressWait, "address-wait", 30*time.Second, "how long to wait, after rendering, for the instance's address to resolve to the pod's IP (0: not at all); the jobs start either way")
		f.StringVar(&launcherDir, "install-launcher", "", "copy this binary there, the process containers' launcher")
		f.StringVar(&instance, "instance", "", "the process containers' shared plan (JSON), written in --plan-dir")
		f.StringVar(&planDir, "plan-dir", contract.PlanDir, "where the instance's plan and the setup steps' marks are")
		step.flags(cmd)
		f.StringVar(&terminationLog, "termination-log", "/dev/termination-log", "file receiving the error list on failure")
		return cmd
	})
}
