package app

import (
	"context"
	"encoding/json"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/bosh-injector/bosh-injector/inject/runtime"
	"github.com/bosh-injector/bosh-injector/inject/runtime/contract"
)

// The in-pod side of the day-2 commands (instances --ps, logs, ssh), which
// they exec in an instance's first process container.
func init() {
	register(func(g *globalOptions) *cobra.Command {
		var o runtimeOptions
		cmd := &cobra.Command{
			Use:   contract.StatusCommand,
			Short: "Print the instance's process states and failed lifecycle scripts as JSON (for `instances --ps`)",
			Args:  cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				// An ended context: WaitSetup only says whether it ended.
				ctx, cancel := context.WithCancel(cmd.Context())
				cancel()
				setup := contract.WaitSetup(ctx, o.planDir) == nil
				st := contract.Status{Setup: setup}
				if in, err := o.instance(cmd, g); err == nil {
					st = in.Status(setup)
				}
				return json.NewEncoder(cmd.OutOrStdout()).Encode(st)
			},
		}
		o.flags(cmd)
		return cmd
	})

	register(func(*globalOptions) *cobra.Command {
		var vcap string
		var jobs []string
		cmd := &cobra.Command{
			Use:   contract.LogArchive,
			Short: "Write the instance's /var/vcap/sys/log as a gzipped tarball to stdout (for `logs`)",
			Args:  cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				return runtime.ArchiveLogs(cmd.OutOrStdout(), filepath.Join(vcap, "sys", "log"), jobs)
			},
		}
		cmd.Flags().StringVar(&vcap, "vcap", "/var/vcap", "root of the BOSH directories")
		cmd.Flags().StringArrayVar(&jobs, "job", nil, "pack only this job's logs (repeatable)")
		return cmd
	})

	register(func(*globalOptions) *cobra.Command {
		var root bool
		var command string
		cmd := &cobra.Command{
			Use:   contract.Shell,
			Short: "Run a login shell, or -c COMMAND, as vcap or root (for `ssh`)",
			Args:  cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				code, err := runtime.Shell(cmd.Context(), root, command, cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
				if err != nil {
					return err
				}
				if code != 0 {
					return exitError{code: code}
				}
				return nil
			},
		}
		cmd.Flags().BoolVar(&root, "root", false, "run as root, as `sudo` does on a BOSH VM")
		cmd.Flags().StringVarP(&command, "command", "c", "", "the command to run (sh -c); a login shell when empty")
		return cmd
	})
}
