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
			Long: `variables mirrors ` + "`bosh -d DEPLOYMENT variables`" + `: the manifest's variables that
have a value, as ID, Name and Type. With the embedded config server (the chart's
default) they are its current versions: ID is the version's id, Name
"/<director-name>/<deployment>/<name>". With configServer.mode=secrets they are
the ` + "`<deployment>.var-<name>`" + ` Secrets: ID is the Secret's resourceVersion, Name
"/<namespace>/<deployment>/<name>". Values are never read out.`,
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
