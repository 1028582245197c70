package app

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/bosh-injector/bosh-injector/gather/client/day2"
)

// changeCommand is stop, start, restart or recreate: the action on the
// instances the spec names, in the deploy's order.
func changeCommand(action, short, long string, drains bool) *cobra.Command {
	var o day2Options
	var co day2.ChangeOptions
	cmd := &cobra.Command{
		Use:   action + " -d DEPLOYMENT [GROUP[/INDEX|/UUID]]",
		Short: short,
		Long: long + `

It mirrors ` + "`bosh -d DEPLOYMENT " + action + "`" + ` on the deployment, a group or an instance:
the groups in manifest order (consecutive serial: false groups at once), each
group's instances in the update block's canaries, then max_in_flight at a time,
AZ by AZ, as a deploy takes them; an instance that does not get there within
its watch time (at least a minute, plus its drain time) stops the rest, and the
error says what to look at. There are no tasks, --hard, --soft or --fix.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			d, _, instances, err := o.instances(cmd.Context(), args)
			if err != nil {
				return err
			}
			co.Out = cmd.OutOrStdout()
			fmt.Fprintf(co.Out, "Task: %s of %d instance(s) of deployment '%s'\n", action, len(instances), d.Name())
			if err := d.Change(cmd.Context(), action, instances, co); err != nil {
				return err
			}
			fmt.Fprintln(co.Out, "Succeeded")
			return nil
		},
	}
	o.flags(cmd, false)
	if drains {
		cmd.Flags().BoolVar(&co.SkipDrain, "skip-drain", false, "do not run the jobs' drain scripts")
	}
	return cmd
}
