package app

import (
	"github.com/spf13/cobra"

	"github.com/bosh-injector/bosh-injector/gather/client/day2"
)

func init() {
	register(func(*globalOptions) *cobra.Command {
		return changeCommand(day2.Restart, "Stop then start instances in their pods, as `bosh restart` does",
			`restart is stop then start of each instance in the same pod: pre-stop, drain,
the processes stopped, post-stop, then the processes started and post-start,
the pod and its disk kept.`, true)
	})
}
