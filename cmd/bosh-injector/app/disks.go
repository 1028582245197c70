package app

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bosh-injector/bosh-injector/gather/client/disks"
)

func init() {
	register(func(*globalOptions) *cobra.Command {
		var kubeconfig, namespace string
		var orphaned, all bool
		cmd := &cobra.Command{
			Use:   "disks --orphaned",
			Short: "List orphaned persistent disks as `bosh disks --orphaned` does",
			Long: `disks --orphaned lists the claims no instance mounts any more (a group scaled
down, a StatefulSet or deployment deleted), which the operator keeps and
labels as the director keeps orphaned disks, with the instance that used
each and when it was orphaned. The operator deletes them after the
retention (its --orphaned-disk-retention, 5 days by default); delete-disk
deletes one sooner.`,
			Args: cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				if !orphaned {
					return errors.New("only orphaned disks are listed: give --orphaned (an instance's disks are its StatefulSet's claims: kubectl get pvc)")
				}
				c, ns, err := userClient(kubeconfig, namespace)
				if err != nil {
					return err
				}
				if all {
					ns = ""
				}
				list, err := disks.Orphaned(cmd.Context(), c, ns)
				if err != nil {
					return err
				}
				return disks.Print(cmd.OutOrStdout(), list, all)
			},
		}
		f := cmd.Flags()
		f.BoolVar(&orphaned, "orphaned", false, "list orphaned disks")
		f.BoolVarP(&all, "all-namespaces", "A", false, "list those of every namespace")
		userFlags(cmd, &kubeconfig, &namespace)
		return cmd
	})
	register(func(*globalOptions) *cobra.Command {
		var kubeconfig, namespace string
		cmd := &cobra.Command{
			Use:   "delete-disk DISK",
			Short: "Delete an orphaned persistent disk as `bosh delete-disk` does",
			Args:  cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				c, ns, err := userClient(kubeconfig, namespace)
				if err != nil {
					return err
				}
				if err := disks.Delete(cmd.Context(), c, ns, args[0]); err != nil {
					return err
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "deleted orphaned disk %s\n", args[0])
				return err
			},
		}
		userFlags(cmd, &kubeconfig, &namespace)
		return cmd
	})
}

func userFlags(cmd *cobra.Command, kubeconfig, namespace *string) {
	f := cmd.Flags()
	f.StringVar(kubeconfig, "kubeconfig", "", "path to a kubeconfig; $KUBECONFIG or ~/.kube/config when empty")
	f.StringVarP(namespace, "namespace", "n", "", "the deployment's namespace; the kubeconfig context's when empty")
}

// userClient connects with the user's kubeconfig and returns the namespace
// given, else the context's.
func userClient(kubeconfig, namespace string) (client.Client, string, error) {
	cluster, ns, err := userCluster(kubeconfig, namespace)
	if err != nil {
		return nil, "", err
	}
	return cluster.Client, ns, nil
}
