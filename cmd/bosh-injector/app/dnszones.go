package app

import (
	"github.com/spf13/cobra"

	"github.com/bosh-injector/bosh-injector/gather/gathering/dns"
)

func init() {
	register(func(g *globalOptions) *cobra.Command {
		var o dns.SyncOptions
		var kubeconfig string
		cmd := &cobra.Command{
			Use:   "dns-zones",
			Short: "Keep a directory holding every deployment's DNS records as zone files, for CoreDNS's auto plugin",
			Args:  cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				log, err := g.logger(cmd.ErrOrStderr())
				if err != nil {
					return err
				}
				cfg, err := restConfig(kubeconfig)
				if err != nil {
					return err
				}
				return dns.RunSync(cmd.Context(), cfg, o, log)
			},
		}
		cmd.Flags().StringVar(&o.Dir, "dir", "/etc/coredns/zones", "directory of the zone files")
		cmd.Flags().StringSliceVar(&o.Namespaces, "watch-namespaces", nil, "namespaces whose DNS records to serve (comma-separated); all when empty")
		cmd.Flags().StringVar(&kubeconfig, "kubeconfig", "", "path to a kubeconfig; in-cluster configuration when empty")
		return cmd
	})
}
