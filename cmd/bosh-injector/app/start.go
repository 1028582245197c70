package app

import (
	"github.com/spf13/cobra"

	"github.com/bosh-injector/bosh-injector/gather/client/day2"
	"github.com/bosh-injector/bosh-injector/gather/names"
)

func init() {
	register(func(*globalOptions) *cobra.Command {
		return changeCommand(day2.Start, "Start stopped instances' processes in their pods, as `bosh start` does",
			`start removes the instance's stopped record from the manifest Secret and the
pod's `+names.AnnotationDesiredState+` annotation: the launchers
start the processes again and post-start runs again; it waits until the pod is
Ready. The jobs' pre-start scripts do not run again (they ran when the pod
started).`, false)
	})
}
