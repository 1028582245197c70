package app

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version is set at build time with -ldflags "-X ...app.version=v1.2.3".
var version = "dev"

func init() {
	register(func(*globalOptions) *cobra.Command {
		return &cobra.Command{
			Use:   "version",
			Short: "Print the bosh-injector version",
			Args:  cobra.NoArgs,
			Run: func(cmd *cobra.Command, _ []string) {
				commit := "unknown"
				if info, ok := debug.ReadBuildInfo(); ok {
					for _, s := range info.Settings {
						if s.Key == "vcs.revision" {
							commit = s.Value
						}
					}
				}
				fmt.Fprintf(cmd.OutOrStdout(), "bosh-injector %s (commit %s, %s)\n", version, commit, runtime.Version())
			},
		}
	})
}
