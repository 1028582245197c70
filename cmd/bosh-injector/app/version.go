package app

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version and commit are set at build time (Makefile, Dockerfile) with
// -ldflags "-X ...app.version=v1.2.3 -X ...app.commit=<sha>".
var version, commit = "dev", ""

func init() {
	register(func(*globalOptions) *cobra.Command {
		return &cobra.Command{
			Use:   "version",
			Short: "Print the bosh-injector version and commit",
			Args:  cobra.NoArgs,
			Run: func(cmd *cobra.Command, _ []string) {
				fmt.Fprintf(cmd.OutOrStdout(), "bosh-injector %s (commit %s, %s)\n", version, buildCommit(), runtime.Version())
			},
		}
	})
}

// buildCommit is the commit given at link time, else the one `go build`
// records from the VCS, else "unknown".
func buildCommit() string {
	if commit != "" {
		return commit
	}
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" {
				return s.Value
			}
		}
	}
	return "unknown"
}
