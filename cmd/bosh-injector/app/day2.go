package app

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/bosh-injector/bosh-injector/gather/client/day2"
)

// day2Options are the flags the day-2 commands share, as `bosh` and
// kubectl name them.
type day2Options struct {
	deployment, namespace, kubeconfig string
	json                              bool
}

func (o *day2Options) flags(cmd *cobra.Command, table bool) {
	f := cmd.Flags()
	f.StringVarP(&o.deployment, "deployment", "d", "", "the deployment's name (required)")
	f.StringVarP(&o.namespace, "namespace", "n", "", "the deployment's namespace; the kubeconfig context's when empty")
	f.StringVar(&o.kubeconfig, "kubeconfig", "", "path to a kubeconfig; $KUBECONFIG or ~/.kube/config when empty")
	_ = cmd.MarkFlagRequired("deployment")
	if table {
		f.BoolVar(&o.json, "json", false, "print the table as `bosh --json` does")
	}
}

// open connects with the user's credentials and finds the deployment.
func (o *day2Options) open(ctx context.Context) (*day2.Deployment, error) {
	c, ns, err := userCluster(o.kubeconfig, o.namespace)
	if err != nil {
		return nil, err
	}
	return day2.Open(ctx, c, ns, o.deployment)
}

// instances opens the deployment and finds the instances args[0] names
// (all without it); spec is args[0] or "".
func (o *day2Options) instances(ctx context.Context, args []string) (d *day2.Deployment, spec string, instances []day2.Instance, err error) {
	if d, err = o.open(ctx); err != nil {
		return nil, "", nil, err
	}
	if len(args) == 1 {
		spec = args[0]
	}
	instances, err = d.Instances(ctx, spec)
	return d, spec, instances, err
}

// print writes t as text or, with --json, as `bosh --json` does.
func (o *day2Options) print(cmd *cobra.Command, t day2.Table) error {
	if o.json {
		return t.JSON(cmd.OutOrStdout())
	}
	return t.Text(cmd.OutOrStdout())
}
