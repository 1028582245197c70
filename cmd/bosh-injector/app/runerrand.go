package app

import (
	"github.com/spf13/cobra"

	"github.com/bosh-injector/bosh-injector/gather/client/errand"
	"github.com/bosh-injector/bosh-injector/gather/client/instances"
)

func init() {
	register(func(*globalOptions) *cobra.Command {
		var kubeconfig, namespace string
		var selectors []string
		var o errand.Options
		cmd := &cobra.Command{
			Use:   "run-errand DEPLOYMENT ERRAND",
			Short: "Run an errand as `bosh run-errand` does, print its output and exit with its status",
			Long: `run-errand runs an errand of a gathered deployment with the deployment's
current configuration version, as the director resolves the name: a job of
that name runs its bin/run in the running pods of the service groups that
have it (exec, all at once), as the agent runs it: as root, with the
agent's PATH, in the job's <job>-errand container (a job whose monit checks
no process starts nothing else); an instance group of that name (lifecycle:
errand) runs its first instance as a new Job copied from the group's
suspended template Job, which ` + "`bosh-injector objects`" + ` prints. The output of
each instance is printed, prefixed with the instance when there are several;
the exit status is the first failing instance's, 0 when all succeeded.
It runs with your kubeconfig's credentials.`,
			Args: cobra.ExactArgs(2),
			RunE: func(cmd *cobra.Command, args []string) error {
				o.Deployment, o.Errand = args[0], args[1]
				for _, s := range selectors {
					f, err := instances.ParseFilter(s)
					if err != nil {
						return err
					}
					o.Filters = append(o.Filters, f)
				}
				cluster, ns, err := userCluster(kubeconfig, namespace)
				if err != nil {
					return err
				}
				o.Namespace, o.Out = ns, cmd.OutOrStdout()
				code, err := errand.Run(cmd.Context(), cluster, o)
				if err != nil {
					return err
				}
				if code != 0 {
					return exitError{code: code}
				}
				return nil
			},
		}
		f := cmd.Flags()
		f.StringVar(&kubeconfig, "kubeconfig", "", "path to a kubeconfig; $KUBECONFIG or ~/.kube/config when empty")
		f.StringVarP(&namespace, "namespace", "n", "", "the deployment's namespace; the kubeconfig context's when empty")
		f.StringArrayVar(&selectors, "instance", nil, "run only on this instance: group, group/index or group/id (repeatable; for errands named by a job)")
		f.BoolVar(&o.WhenChanged, "when-changed", false, "skip the run when nothing it depends on changed since its last successful run")
		f.BoolVar(&o.KeepAlive, "keep-alive", false, "keep the run's Job and its pods afterwards")
		return cmd
	})
}
