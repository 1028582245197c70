package app

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/bosh-injector/bosh-injector/gather/client/day2"
)

func init() {
	register(func(*globalOptions) *cobra.Command {
		var o day2Options
		var jobs []string
		var follow bool
		var lines int
		var dir string
		cmd := &cobra.Command{
			Use:   "logs -d DEPLOYMENT [GROUP[/INDEX|/UUID]]",
			Short: "Fetch or follow instances' job logs, as `bosh logs` does",
			Long: `logs mirrors ` + "`bosh -d DEPLOYMENT logs`" + `: it packs /var/vcap/sys/log of the
instance (every instance of the group or the deployment when less is named),
only --job's directories when given, into DIR/<deployment>[.<group>[.<index or
uuid>]]-<time>.tgz; several instances' tarballs are bundled in it as
<group>.<uuid>.tgz. --follow (-f) follows the logs (tail -F of the last --num
lines, as root), each line prefixed with its instance when there are several,
until interrupted. It reads the logs through exec in the instance's first
process container, so the instance's pod must run; it has no --agent (there is
no agent log) and no --system.`,
			Args: cobra.MaximumNArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				d, spec, instances, err := o.instances(cmd.Context(), args)
				if err != nil {
					return err
				}
				if follow {
					return d.FollowLogs(cmd.Context(), instances, jobs, lines, cmd.OutOrStdout())
				}
				path := filepath.Join(dir, day2.LogsName(d.Name(), spec, time.Now()))
				tmp, err := os.CreateTemp(dir, ".logs-*.tgz")
				if err != nil {
					return err
				}
				defer os.Remove(tmp.Name())
				err = d.FetchLogs(cmd.Context(), instances, jobs, tmp)
				if cerr := tmp.Close(); err == nil {
					err = cerr
				}
				if err != nil {
					return err
				}
				if err := os.Rename(tmp.Name(), path); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "Downloaded logs of %d instance(s) to '%s'\n", len(instances), path)
				return nil
			},
		}
		o.flags(cmd, false)
		f := cmd.Flags()
		f.StringArrayVar(&jobs, "job", nil, "only this job's logs (repeatable)")
		f.BoolVarP(&follow, "follow", "f", false, "follow the logs instead of fetching them")
		f.IntVar(&lines, "num", 50, "with --follow, how many last lines to show first")
		f.StringVar(&dir, "dir", ".", "directory receiving the tarball")
		return cmd
	})
}
