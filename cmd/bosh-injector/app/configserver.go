package app

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/bosh-injector/bosh-injector/gather/configserver"
	"github.com/bosh-injector/bosh-injector/gather/configserver/auth"
	"github.com/bosh-injector/bosh-injector/gather/configserver/director"
)

func init() {
	register(func(g *globalOptions) *cobra.Command {
		var o configserver.Options
		var clients []string
		var kubeconfig string
		var directors func() error
		cmd := &cobra.Command{
			Use:   "config-server",
			Short: "Run the embedded config server: CredHub's API over credentials kept in Secrets",
			Args:  cobra.NoArgs,
			PreRunE: func(cmd *cobra.Command, _ []string) error {
				return flagsFromEnv(cmd)
			},
			RunE: func(cmd *cobra.Command, _ []string) error {
				if err := directors(); err != nil {
					return err
				}
				log, err := g.logger(cmd.ErrOrStderr())
				if err != nil {
					return err
				}
				for _, c := range clients {
					name, secret, ok := strings.Cut(c, "=")
					if !ok || name == "" || secret == "" {
						return fmt.Errorf("--client: want NAME=SECRET-NAME, got %q", c)
					}
					o.Clients = append(o.Clients, auth.Client{Name: name, SecretName: secret})
				}
				cfg, err := restConfig(kubeconfig)
				if err != nil {
					return err
				}
				return configserver.Run(cmd.Context(), cfg, o, log)
			},
		}
		f := cmd.Flags()
		f.StringVar(&o.Namespace, "namespace", "bosh-injector", "namespace of the credentials, the token signing key and the clients' Secrets")
		directors = directorFlags(f, &o.Directors)
		f.StringVar(&o.Audience, "audience", director.Audience, "audience gathering Jobs' ServiceAccount tokens must be issued for")
		f.StringArrayVar(&clients, "client", nil, "OAuth client NAME=SECRET-NAME (repeatable): key secret of Secret SECRET-NAME in --namespace is its client secret, optional key scopes its scopes")
		f.StringVar(&o.SigningKeySecret, "signing-key-secret", "bosh-injector-config-server-token-key", "Secret in --namespace holding the token signing key; created when missing")
		f.StringVar(&o.CertDir, "cert-dir", "/etc/bosh-injector/config-server-tls", "directory with tls.crt and tls.key, reloaded when they change")
		f.StringVar(&o.Address, "listen", ":8844", "address to serve on (CredHub's port by default)")
		f.IntVar(&o.SpareKeys, "spare-keys", 128, "RSA keys kept generated ahead, while the server idles: a first gathering's certificates take them instead of waiting for new ones")
		f.StringVar(&o.URL, "url", "", "external URL of the server, /info's auth-server.url and the tokens' issuer; empty takes https://<the request's host>")
		f.StringVar(&kubeconfig, "kubeconfig", "", "path to a kubeconfig; in-cluster configuration when empty")
		return cmd
	})
}
