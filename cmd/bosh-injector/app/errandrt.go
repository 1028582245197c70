package app

import (
	"github.com/spf13/cobra"

	"github.com/bosh-injector/bosh-injector/inject/runtime"
	"github.com/bosh-injector/bosh-injector/inject/runtime/contract"
)

// The in-pod commands of a colocated errand: its container sleeps, and
// run-errand execs the errand in it.
func init() {
	register(func(g *globalOptions) *cobra.Command {
		return &cobra.Command{
			Use:   contract.Sleep,
			Short: "Wait until stopped, reaping orphans (the container of a colocated errand job, where run-errand runs it)",
			Args:  cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				// The container's init: what an errand run leaves behind
				// is reaped here.
				if stop, err := runtime.ReapOrphans(); err == nil {
					defer stop()
				}
				<-cmd.Context().Done()
				return nil
			},
		}
	})

	register(func(g *globalOptions) *cobra.Command {
		var vcap string
		cmd := &cobra.Command{
			Use:   contract.Errand + " JOB",
			Short: "Run the job's bin/run as the agent runs an errand and exit with its status (run-errand execs it in the instance's pod)",
			Long: `errand runs /var/vcap/jobs/<job>/bin/run as the BOSH agent's run_errand does: without
arguments, with this command's environment and the agent's PATH
(/usr/sbin:/usr/bin:/sbin:/bin), as this command's user, its output on this
command's; it exits with bin/run's exit status.`,
			Args: cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				s := runtime.Scripts{VCAP: vcap, Out: cmd.OutOrStdout(), Err: cmd.ErrOrStderr()}
				code, err := s.Errand(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				if code != 0 {
					return exitError{code: code}
				}
				return nil
			},
		}
		cmd.Flags().StringVar(&vcap, "vcap", "/var/vcap", "root of the BOSH directories")
		return cmd
	})
}
