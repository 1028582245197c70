package app

import (
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// flagsFromEnv sets every flag not given on the command line from the
// environment variable BOSH_INJECTOR_<FLAG> (dashes as underscores), so pods
// can configure commands through env.
func flagsFromEnv(cmd *cobra.Command) error {
	var err error
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if f.Changed || err != nil {
			return
		}
		name := "BOSH_INJECTOR_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := os.LookupEnv(name); ok {
			err = cmd.Flags().Set(f.Name, v)
		}
	})
	return err
}
