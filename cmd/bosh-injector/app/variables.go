package app

import (
	"github.com/spf13/cobra"

	"github.com/bosh-injector/bosh-injector/gather/client/day2"
)

func init() {
	register(func(*globalOptions) *cobra.Command {
		var o day2Options
		cmd := &cobra.Command{
			Use:   "variables -d DEPLOYMENT",
			Short: "List a deployment's variables (never their values), as `bosh variables` does",
			Long: `variables mirrors ` + "`bosh -d DEPLOYMENT variables`" + `: the manifest's variables that
have a value, as ID (the variable Secret's resourceVersion, which changes when
the value is stored again), Name ("/<namespace>/<deployment>/<name>": the
namespace stands where the director's name is) and Type. Values are never
read out; the Secrets are ` + "`<deployment>.var-<name>`" + `.`,
			Args: cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				d, err := o.open(cmd.Context())
				if err != nil {
					return err
				}
				vars, err := d.Variables(cmd.Context())
				if err != nil {
					return err
				}
				return o.print(cmd, day2.VariablesTable(vars))
			},
		}
		o.flags(cmd, true)
		return cmd
	})
}
