package app

import (
	"github.com/spf13/cobra"

	"github.com/bosh-injector/bosh-injector/gather/client/day2"
)

func init() {
	register(func(*globalOptions) *cobra.Command {
		return changeCommand(day2.Recreate, "Replace instances' pods, keeping their disks, as `bosh recreate` does",
			`recreate deletes each instance's pod (its preStop hook runs pre-stop and drain;
--skip-drain skips drain) and waits until its StatefulSet's new pod, on the
same persistent disk claim, is Ready. A stopped instance starts, as a
director's recreate leaves it started.`, true)
	})
}
