package app

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/bosh-injector/bosh-injector/gather/client/cck"
)

func init() {
	register(func(*globalOptions) *cobra.Command {
		var kubeconfig, namespace string
		var recreate bool
		cmd := &cobra.Command{
			Use:   "cck DEPLOYMENT",
			Short: "List the deployment's instances on lost nodes and, with --recreate, recreate them elsewhere, as `bosh cck` does",
			Long: `cck lists the instances of a deployment whose node is not Ready or gone:
a StatefulSet replaces a pod on a lost node only once the pod is deleted,
which the node's kubelet never confirms. With --recreate it deletes those
pods at once, and their StatefulSets make them again, with the same names and
indexes, on nodes of their zones that run, as ` + "`bosh cck`" + ` recreates a VM whose
agent stopped answering; a stopped instance stays stopped, as the director
keeps its state. Recreate only when the nodes are really down: a
node merely cut off still runs its instances. A persistent disk on a
node-local volume cannot follow: the instance waits for its node.
It runs with your kubeconfig's credentials.`,
			Args: cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				c, ns, err := userCluster(kubeconfig, namespace)
				if err != nil {
					return err
				}
				kube := c.Kube
				lost, err := cck.Of(cmd.Context(), kube, ns, args[0])
				if err != nil {
					return err
				}
				out := cmd.OutOrStdout()
				if len(lost) == 0 {
					fmt.Fprintf(out, "no instance of deployment %s is on a lost node\n", args[0])
					return nil
				}
				for _, l := range lost {
					fmt.Fprintln(out, l)
				}
				if !recreate {
					fmt.Fprintln(out, "run again with --recreate to recreate them on nodes that run")
					return nil
				}
				if err := cck.Recreate(cmd.Context(), kube, ns, lost); err != nil {
					return err
				}
				fmt.Fprintf(out, "recreating %d instances: their StatefulSets make them again\n", len(lost))
				return nil
			},
		}
		f := cmd.Flags()
		f.StringVar(&kubeconfig, "kubeconfig", "", "path to a kubeconfig; $KUBECONFIG or ~/.kube/config when empty")
		f.StringVarP(&namespace, "namespace", "n", "", "the deployment's namespace; the kubeconfig context's when empty")
		f.BoolVar(&recreate, "recreate", false, "delete the lost instances' pods at once so that they are made again elsewhere")
		return cmd
	})
}
