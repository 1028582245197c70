package app

import (
	"errors"
	"time"

	"github.com/spf13/cobra"

	"github.com/bosh-injector/bosh-injector/gather/rendering"
	"github.com/bosh-injector/bosh-injector/gather/resolved"
	"github.com/bosh-injector/bosh-injector/inject/runtime/contract"
)

func init() {
	register(func(g *globalOptions) *cobra.Command {
		var cfg rendering.Config
		var terminationLog, launcherDir, instance string
		cmd := &cobra.Command{
			Use:   "render",
			Short: "Render the BOSH jobs of this pod's instance (the render init container)",
			Long: `render takes the pod's instance from the environment the webhook sets
(` + contract.EnvIndex + `, ` + contract.EnvPodIP + `, ` + contract.EnvNamespace + `), reads the mounted
ig-resolved Secret and the jobs copied from the release images, and renders every
template of every job into /var/vcap/jobs in one Ruby process. It then waits
(--address-wait) for the instance's address to resolve to the pod's IP, as a VM's
DNS record exists before its jobs start, and installs the launcher and the
process containers' shared plan (--instance) in --install-launcher's directory.`,
			Args: cobra.NoArgs,
			PreRunE: func(cmd *cobra.Command, _ []string) error {
				return flagsFromEnv(cmd)
			},
			RunE: func(cmd *cobra.Command, _ []string) error {
				c, err := rendering.ConfigFromEnv(cfg)
				if err == nil && instance != "" && launcherDir == "" {
					err = errors.New("--instance is written next to the launcher: give --install-launcher too")
				}
				if err == nil {
					c.Log, err = g.logger(cmd.ErrOrStderr())
				}
				if err == nil {
					err = rendering.Run(cmd.Context(), c)
				}
				if err == nil && launcherDir != "" {
					err = installLauncher(launcherDir, instance)
				}
				if err != nil {
					return fail(cmd, terminationLog, err, 1)
				}
				return nil
			},
		}
		f := cmd.Flags()
		f.StringVar(&cfg.ResolvedFile, "resolved", "/var/vcap/bosh-injector/resolved/"+resolved.Key, "the mounted ig-resolved Secret's data file")
		f.StringVar(&cfg.JobsSrc, "jobs-src", "/var/vcap/all-releases/jobs-src", "jobs copied from the release images")
		f.StringVar(&cfg.VCAP, "vcap", "/var/vcap", "root of the BOSH directories")
		f.DurationVar(&cfg.AddressWait, "address-wait", 30*time.Second, "how long to wait, after rendering, for the instance's address to resolve to the pod's IP (0: not at all); the jobs start either way")
		f.StringVar(&launcherDir, "install-launcher", "", "copy this binary there, the process containers' launcher")
		f.StringVar(&instance, "instance", "", "the process containers' shared plan (JSON), written next to the launcher")
		f.StringVar(&terminationLog, "termination-log", "/dev/termination-log", "file receiving the error list on failure")
		return cmd
	})
}
