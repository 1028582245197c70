package app

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/bosh-injector/bosh-injector/gather/client/day2"
	"github.com/bosh-injector/bosh-injector/gather/names"
)

func init() {
	register(func(*globalOptions) *cobra.Command {
		var o day2Options
		var do day2.DeleteOptions
		cmd := &cobra.Command{
			Use:   "delete-deployment -d DEPLOYMENT",
			Short: "Delete a deployment, orphaning its disks, as `bosh delete-deployment` does",
			Long: `delete-deployment mirrors ` + "`bosh -d DEPLOYMENT delete-deployment`" + `: it runs every
instance's pre-stop and drain scripts (told the VM, instance and deployment are
deleted; a failure stops it unless --force), deletes the deployment's
StatefulSets and Jobs and waits for the pods to go; their persistent disk
claims stay, orphaned by the operator's disk controller (label
` + names.LabelOrphaned + `=true, annotations ` + names.AnnotationOrphanedAt + ` and
` + names.AnnotationOrphanedInstance + `), as the director orphans disks, and reported
once it has; then it deletes the manifest Secret and what gathering
made of it: resolved and BPM Secrets, links, Services, DNS records, the
gathering's Jobs and RBAC. The generated variable Secrets stay unless
--delete-variables, as the director's config server keeps credentials;
variable Secrets you created are never deleted. A pod that does not go in
--timeout is an error; running the command again resumes.`,
			Args: cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				d, err := o.open(cmd.Context())
				if err != nil {
					return err
				}
				do.Out = cmd.OutOrStdout()
				return d.Delete(cmd.Context(), do)
			},
		}
		o.flags(cmd, false)
		cmd.Flags().BoolVar(&do.Force, "force", false, "go on when an instance's pre-stop or drain fails")
		cmd.Flags().BoolVar(&do.DeleteVariables, "delete-variables", false, "delete the deployment's generated variable Secrets too")
		cmd.Flags().DurationVar(&do.Timeout, "timeout", 10*time.Minute, "how long the pods may take to drain and go")
		return cmd
	})
}
