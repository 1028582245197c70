package app

import (
	"github.com/spf13/cobra"

	"github.com/bosh-injector/bosh-injector/gather/configserver/director"
	"github.com/bosh-injector/bosh-injector/gather/operator/disks"
	"github.com/bosh-injector/bosh-injector/gather/operator/manager"
	"github.com/bosh-injector/bosh-injector/inject"
)

func init() {
	register(func(g *globalOptions) *cobra.Command {
		var o manager.Options
		var kubeconfig string
		var directors func() error
		cmd := &cobra.Command{
			Use:   "webhook",
			Short: "Run the operator: the admission webhooks (pods, StatefulSet updates) and the controllers (gathering job runner, deploy, disks)",
			Args:  cobra.NoArgs,
			PreRunE: func(cmd *cobra.Command, _ []string) error {
				return flagsFromEnv(cmd)
			},
			RunE: func(cmd *cobra.Command, _ []string) error {
				if err := directors(); err != nil {
					return err
				}
				if err := o.ConfigServer.Validate(); err != nil {
					return err
				}
				log, err := g.logger(cmd.ErrOrStderr())
				if err != nil {
					return err
				}
				cfg, err := restConfig(kubeconfig)
				if err != nil {
					return err
				}
				return manager.Run(cmd.Context(), cfg, o, log)
			},
		}
		f := cmd.Flags()
		f.StringVar(&o.Namespace, "namespace", "bosh-injector", "the operator's namespace (never injected; leader election lease)")
		f.StringVar(&o.OperatorImage, "operator-image", "localhost/bosh-injector:dev", "image of the render init containers and gathering Jobs")
		f.IntVar(&o.DrainSeconds, "drain-seconds", inject.DefaultDrainSeconds, "time an instance's pre-stop and drain scripts get before its processes stop; part of the pods' terminationGracePeriodSeconds")
		f.DurationVar(&o.OrphanedDiskRetention, "orphaned-disk-retention", disks.DefaultRetention, "how long a claim no instance mounts (scaled down, deployment deleted) is kept before the operator deletes it; the director's default is 5 days")
		f.StringVar(&o.ClusterDomain, "cluster-domain", "cluster.local", "cluster DNS domain of instance addresses")
		f.StringVar(&o.CertDir, "cert-dir", "/etc/bosh-injector/serving-certs", "directory with tls.crt and tls.key, reloaded when they change")
		f.StringVar(&o.Host, "host", "", "address the webhook server listens on")
		f.IntVar(&o.Port, "port", 9443, "webhook server port")
		f.IntVar(&o.MetricsPort, "metrics-port", 8080, "metrics port; 0 disables")
		f.IntVar(&o.HealthPort, "health-port", 8081, "/healthz and /readyz port; 0 disables")
		f.BoolVar(&o.LeaderElection, "leader-elect", true, "elect one replica to run the controllers")
		f.BoolVar(&o.Webhook, "webhook", true, "serve the admission webhook")
		f.BoolVar(&o.Runner, "runner", true, "run the controllers: the gathering job runner, the deploy controller and the disk controller")
		f.StringVar(&o.DNSService, "dns-service", "", "CoreDNS Service in --namespace that injected pods resolve BOSH DNS names with; empty leaves their DNS as it is")
		f.StringVar(&o.ReleaseJobs, "release-jobs", manager.ReleaseJobsAuto, "how injected pods get the release images' jobs: image (image volumes), copy (an init container per release) or auto (image where the API server and every node support image volumes)")
		f.StringSliceVar(&o.WatchNamespaces, "watch-namespaces", nil, "namespaces the operator caches and works in (comma-separated); all when empty")
		cs := &o.ConfigServer
		f.StringVar(&cs.Mode, "config-server-mode", director.ModeSecrets, "where gatherings keep variables: embedded or external (a config server at --config-server-url, as a director's), secrets (<deployment>.var-<name> Secrets)")
		f.StringVar(&cs.URL, "config-server-url", "", "the config server's CredHub API URL, joined with v1/data as the director joins it (https://host:8844/api/)")
		f.StringVar(&cs.CAFile, "config-server-ca-file", "", "PEM file of the config server's CA, read for each gathering")
		directors = directorFlags(f, &cs.Directors)
		f.StringVar(&cs.UAA.URL, "uaa-url", "", "external mode: the UAA issuing the server's tokens (client_credentials)")
		f.StringVar(&cs.UAA.ClientID, "uaa-client-id", "", "external mode: the UAA client id")
		f.StringVar(&cs.UAA.ClientSecret, "uaa-client-secret-secret", "", "external mode: Secret in --namespace holding the UAA client secret")
		f.StringVar(&cs.UAA.ClientSecretKey, "uaa-client-secret-key", "secret", "external mode: its key")
		f.StringVar(&cs.UAA.CAFile, "uaa-ca-file", "", "external mode: PEM file of the UAA's CA")
		f.StringVar(&cs.UAA.PublicKeyFile, "config-server-public-key-file", "", "external mode: PEM file of the UAA's token signing key; gatherings verify tokens with it")
		f.StringVar(&kubeconfig, "kubeconfig", "", "path to a kubeconfig; in-cluster configuration when empty")
		return cmd
	})
}
