package app

import (
	"github.com/spf13/cobra"

	"github.com/bosh-injector/bosh-injector/gather/client/day2"
	"github.com/bosh-injector/bosh-injector/gather/names"
)

func init() {
	register(func(*globalOptions) *cobra.Command {
		return changeCommand(day2.Stop, "Stop instances' processes, keeping their pods and disks, as `bosh stop` does",
			`stop records the instance stopped on the manifest Secret (annotation
`+names.AnnotationStopped("POD")+`) and sets the pod's `+names.AnnotationDesiredState+`
annotation to stopped: the launchers run the jobs' pre-stop and drain scripts
(told the VM, instance and deployment stay), stop every process and run
post-stop; the pod stays, not Ready, its disk attached. As a director keeps a
stopped instance stopped across VM recreation, its processes stay stopped
across container restarts and pod replacement (a deleted or evicted pod, a
rollout: the webhook starts the new pod stopped, and a deploy counts it once
it runs) until `+"`start`"+`, `+"`restart`"+` or `+"`recreate`"+`. Instances running a
monit-only job are refused (use recreate).`, true)
	})
}
