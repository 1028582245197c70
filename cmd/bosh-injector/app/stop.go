package app

import (
	"github.com/spf13/cobra"

	"github.com/bosh-injector/bosh-injector/gather/client/day2"
	"github.com/bosh-injector/bosh-injector/gather/names"
)

func init() {
	register(func(*globalOptions) *cobra.Command {
		return changeCommand(day2.Stop, "Stop instances' processes, keeping their pods and disks, as `bosh stop` does",
			`stop sets the pod's `+names.AnnotationDesiredState+` annotation to stopped: the
launchers run the jobs' pre-stop and drain scripts (told the VM, instance and
deployment stay), stop every process and run post-stop; the pod stays, not
Ready, its disk attached, and its processes stay stopped across container
restarts until `+"`start`"+`. A rollout or a deleted pod brings the instance back
started. Instances running a monit-only job are refused (use recreate).`, true)
	})
}
