package app

import (
	"github.com/spf13/cobra"

	"github.com/bosh-injector/bosh-injector/gather/client/day2"
)

func init() {
	register(func(*globalOptions) *cobra.Command {
		var o day2Options
		var t day2.InstancesOptions
		cmd := &cobra.Command{
			Use:   "instances -d DEPLOYMENT [GROUP[/INDEX|/UUID]]",
			Short: "List a deployment's instances and their process states, as `bosh instances` does",
			Long: `instances mirrors ` + "`bosh -d DEPLOYMENT instances`" + `: a row per instance of the
deployment's service groups, "group/uuid", its process state (running,
starting, failing, stopped), AZ and the pod's IPs, then its index and bootstrap
flag (which bosh shows with --details). --ps adds a row per BPM process with the
state its launcher recorded; --details adds the instance's state, the pod as
its VM CID, the pod's claims as its disk CIDs and the pod's UID as its agent
ID; --failing keeps what is not running. An instance whose post-start failed is
failing. It has no --vitals or --dns. Pods are asked through exec.`,
			Args: cobra.MaximumNArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				d, _, instances, err := o.instances(cmd.Context(), args)
				if err != nil {
					return err
				}
				return o.print(cmd, day2.InstancesTable(d.Rows(cmd.Context(), instances), t))
			},
		}
		o.flags(cmd, true)
		f := cmd.Flags()
		f.BoolVar(&t.Processes, "ps", false, "show each instance's processes")
		f.BoolVarP(&t.Details, "details", "i", false, "show the instance's state, pod (VM CID), claims (disk CIDs) and pod UID (agent ID)")
		f.BoolVarP(&t.Failing, "failing", "f", false, "show only the instances (and processes) that are not running")
		return cmd
	})
}
