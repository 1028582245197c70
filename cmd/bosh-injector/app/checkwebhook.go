package app

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/bosh-injector/bosh-injector/webhook"
)

func init() {
	register(func(*globalOptions) *cobra.Command {
		var url, caFile string
		cmd := &cobra.Command{
			Use:   "check-webhook",
			Short: "Check that the admission webhook answers over TLS (the chart's helm test)",
			Long: `check-webhook sends the webhook the admission request the apiserver would send for a
labelled pod of a deployment that was never gathered, trusting only the given CA, and
succeeds when the webhook denies it as it should.`,
			Args: cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				ca, err := os.ReadFile(caFile)
				if err != nil {
					return fmt.Errorf("--ca: %w", err)
				}
				msg, err := webhook.Check(cmd.Context(), url, ca)
				if err != nil {
					return fmt.Errorf("webhook %s: %w", url, err)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "webhook %s answers: %s\n", url, msg)
				return nil
			},
		}
		cmd.Flags().StringVar(&url, "url", "", "the webhook's URL, https://<service>.<namespace>.svc/inject-pod")
		cmd.Flags().StringVar(&caFile, "ca", "/etc/bosh-injector/serving-certs/ca.crt", "the CA that issued the webhook's certificate")
		_ = cmd.MarkFlagRequired("url")
		return cmd
	})
}
