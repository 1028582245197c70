package app

import (
	"github.com/spf13/cobra"

	"github.com/bosh-injector/bosh-injector/gather/client/day2"
)

func init() {
	register(func(*globalOptions) *cobra.Command {
		var o day2Options
		cmd := &cobra.Command{
			Use:   "events -d DEPLOYMENT",
			Short: "List a deployment's Kubernetes Events in the director's words, as `bosh events` does",
			Long: `events mirrors ` + "`bosh -d DEPLOYMENT events`" + `: the Events of the deployment's manifest
Secret (gathering and deploy), StatefulSets, pods and claims, oldest first,
with the director's action and object type where one maps (a pod scheduled is
"create vm", killed "delete vm", a claim provisioned "create disk", a gathering
or deploy "update deployment"); other reasons keep their name. IDs number the
Events listed; there are no tasks. Events live as long as the cluster keeps
them (an hour by default), not as long as the director's.`,
			Args: cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				d, err := o.open(cmd.Context())
				if err != nil {
					return err
				}
				events, err := d.Events(cmd.Context())
				if err != nil {
					return err
				}
				return o.print(cmd, day2.EventsTable(d.Name(), events))
			},
		}
		o.flags(cmd, true)
		return cmd
	})
}
