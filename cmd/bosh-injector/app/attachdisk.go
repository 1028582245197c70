package app

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/bosh-injector/bosh-injector/gather/client/disks"
	"github.com/bosh-injector/bosh-injector/gather/gathering/objects"
)

func init() {
	register(func(*globalOptions) *cobra.Command {
		var o day2Options
		var timeout time.Duration
		cmd := &cobra.Command{
			Use:   "attach-disk -d DEPLOYMENT GROUP/ID DISK",
			Short: "Attach an orphaned persistent disk to an instance as `bosh attach-disk` does",
			Long: `attach-disk makes an orphaned disk (see disks --orphaned) the persistent disk
of an instance, and orphans the instance's current disk (listed by disks
--orphaned with the instance and time, kept for the retention), as the
director does. The instance's pod is deleted (its jobs drain) and its
StatefulSet starts it again on the attached disk; both volumes are retained
while they change claims, so an interrupted attach-disk loses no data.`,
			Args: cobra.ExactArgs(2),
			RunE: func(cmd *cobra.Command, args []string) error {
				d, _, instances, err := o.instances(cmd.Context(), args[:1])
				if err != nil {
					return err
				}
				if len(instances) != 1 || instances[0].Pod == nil {
					return fmt.Errorf("'%s' must name one instance that has a pod (GROUP/ID or GROUP/INDEX)", args[0])
				}
				in := instances[0]
				a := &disks.Attach{Client: d.Client, Out: cmd.OutOrStdout(), Pod: in.Pod, Orphan: args[1],
					Instance: in.FullName(), Poll: 200 * time.Millisecond, Timeout: timeout, Now: time.Now}
				return a.Run(cmd.Context(), objects.VolumeStore)
			},
		}
		o.flags(cmd, false)
		cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Minute, "how long to wait for the pod's drain and each claim")
		return cmd
	})
}
