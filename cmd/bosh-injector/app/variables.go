package app

import (
	"github.com/spf13/cobra"

	"github.com/bosh-injector/bosh-injector/gather/client/day2"
)

func init() {
	register(func(*globalOptions) *cobra.Command {
		var o day2Options
		var server day2.ConfigServer
		cmd := &cobra.Command{
			Use:   "variables -d DEPLOYMENT",
			Short: "List a deployment's variables (never their values), as `bosh variables` does",
			Long: `variables mirrors ` + "`bosh -d DEPLOYMENT variables`" + `: ID, Name and Type of the
variables of the deployment's current variable set. With a config server (the chart's
default), the set its last accepted gathering used: each credential version's id and
full name "/<director-name>/<deployment>/<name>" (type read from the embedded server's
store where you may read it). With configServer.mode=secrets, the ` + "`<deployment>.var-<name>`" + `
Secrets: ID is the resourceVersion, Name "/<namespace>/<deployment>/<name>". Values
are never read out.`,
			Args: cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				d, err := o.open(cmd.Context())
				if err != nil {
					return err
				}
				vars, err := d.Variables(cmd.Context(), server)
				if err != nil {
					return err
				}
				return o.print(cmd, day2.VariablesTable(vars))
			},
		}
		o.flags(cmd, true)
		cmd.Flags().StringVar(&server.Namespace, "operator-namespace", "bosh-injector", "namespace of the chart, where the embedded config server keeps credentials")
		cmd.Flags().StringVar(&server.Director, "director-name", "bosh-injector", "the chart's configServer.directorName")
		return cmd
	})
}
