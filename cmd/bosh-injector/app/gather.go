package app

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bosh-injector/bosh-injector/gather/configserver/director"
	"github.com/bosh-injector/bosh-injector/gather/gathering"
	"github.com/bosh-injector/bosh-injector/gather/operator/status"
	"github.com/bosh-injector/bosh-injector/gather/render/ruby"
)

func init() {
	register(func(g *globalOptions) *cobra.Command {
		var cfg gathering.Config
		var kubeconfig, terminationLog, plan string
		var server configServerFlags
		var render renderOptions
		cmd := &cobra.Command{
			Use:   "gather",
			Short: "Resolve a BOSH deployment and write its per-instance-group Secrets and Services",
			Long: `gather runs in the gathering Job the job runner creates: it reads the manifest
Secret, generates missing variables, binds properties, resolves links, renders every
template of every instance and writes <deployment>.ig-resolved.<ig>-vN and
<deployment>.bpm.<ig>-vN Secrets and the instance Services, building only on the accepted
versions its --plan names. It reports what it wrote in its termination message; the runner
accepts the reports of its own Jobs only. Flags default to the BOSH_INJECTOR_<FLAG>
environment variables.`,
			Args: cobra.NoArgs,
			PreRunE: func(cmd *cobra.Command, _ []string) error {
				return flagsFromEnv(cmd)
			},
			RunE: func(cmd *cobra.Command, _ []string) error {
				if cfg.Namespace == "" || cfg.ManifestSecret == "" {
					return fmt.Errorf("--namespace and --manifest-secret are required (or BOSH_INJECTOR_NAMESPACE, BOSH_INJECTOR_MANIFEST_SECRET)")
				}
				if plan != "" {
					p, err := gathering.ParsePlan(plan)
					if err != nil {
						return err
					}
					cfg.Plan = p
				}
				log, err := g.logger(cmd.ErrOrStderr())
				if err != nil {
					return err
				}
				restConfig, err := restConfig(kubeconfig)
				if err != nil {
					return err
				}
				var confinement *ruby.Confinement
				if restConfig.BearerTokenFile != "" {
					// The templates are the releases' code: they render
					// without the token this process writes Secrets with.
					if confinement, err = ruby.Confine(filepath.Dir(restConfig.BearerTokenFile)); err != nil {
						log.Info(ruby.Unconfined, "reason", err.Error())
					} else {
						log.Info(ruby.Confined)
					}
				}
				renderer, err := render.renderer(confinement)
				if err != nil {
					return err
				}
				c, err := client.New(restConfig, client.Options{})
				if err != nil {
					return err
				}
				ctx := cmd.Context()
				cfg.Remember = g.secrets.Remember
				if cfg.ConfigServer, err = server.configServer(); err != nil {
					return err
				}
				cfg.Progress = gathering.Events(ctx, c, log)
				cfg.Build = version + " " + buildCommit()
				res, err := gathering.Run(ctx, c, cfg, gathering.NewRenderBPM(ctx, renderer), time.Now())
				if err != nil {
					return fail(cmd, terminationLog, err, gatherExitCode(err))
				}
				for _, gr := range res.Groups {
					log.Info("gathered instance group", "deployment", res.Deployment, "instanceGroup", gr.InstanceGroup,
						"resolved", gr.Resolved.Name, "resolvedCreated", gr.Resolved.Created, "bpm", gr.BPM.Name, "bpmCreated", gr.BPM.Created)
				}
				log.Info("gathered", "deployment", res.Deployment, "servicesCreated", len(res.Services.Created),
					"servicesDeleted", len(res.Services.Deleted))
				// The job runner accepts exactly the versions reported here.
				report, err := res.Report().Encode()
				if err != nil {
					return fail(cmd, terminationLog, err, status.ExitInvalidInput)
				}
				if terminationLog != "" {
					if err := os.WriteFile(terminationLog, []byte(report), 0o644); err != nil {
						return fmt.Errorf("writing the termination log: %w", err)
					}
				}
				return nil
			},
		}
		f := cmd.Flags()
		f.StringVar(&cfg.Namespace, "namespace", "", "namespace of the deployment")
		f.StringVar(&cfg.ManifestSecret, "manifest-secret", "", "name of the manifest Secret")
		f.StringVar(&cfg.JobsDir, "jobs-dir", status.JobsDir, "releases' jobs as <dir>/<release>/<job>/job.MF")
		f.StringVar(&cfg.ClusterDomain, "cluster-domain", "cluster.local", "cluster DNS domain of instance addresses")
		f.StringVar(&kubeconfig, "kubeconfig", "", "path to a kubeconfig; in-cluster configuration when empty")
		f.StringVar(&plan, "plan", "", "what the job runner lets the gathering read (JSON): accepted versions, version numbers, other deployments' Secrets; none builds on no stored version")
		f.StringVar(&terminationLog, "termination-log", "/dev/termination-log", "file receiving the error list on failure, the versions written on success")
		server.register(f)
		render.register(f)
		return cmd
	})
}

// configServerFlags say where gather reads its variables: a config server
// when --config-server-url is set.
type configServerFlags struct {
	url, ca, tokenFile, director, deployment                string
	uaaURL, uaaClientID, uaaSecretFile, uaaCA, uaaPublicKey string
}

func (o *configServerFlags) register(f *pflag.FlagSet) {
	f.StringVar(&o.url, "config-server-url", "", "CredHub API URL of the config server holding the deployment's variables (joined with v1/data, as the director joins it); empty: variables are <deployment>.var-<name> Secrets")
	f.StringVar(&o.ca, "config-server-ca", "", "PEM of the CA the config server's certificate is signed by")
	f.StringVar(&o.tokenFile, "config-server-token-file", "", "file holding the bearer token for the config server, read for each request")
	f.StringVar(&o.director, "director-name", "bosh-injector", "director name: a relative ((name)) is /<director-name>/<deployment>/<name>")
	f.StringVar(&o.deployment, "deployment-name", "", "the deployment's name on the config server: the manifest's name")
	f.StringVar(&o.uaaURL, "uaa-url", "", "UAA issuing the config server's tokens (client_credentials), as the director's config_server.uaa.url")
	f.StringVar(&o.uaaClientID, "uaa-client-id", "", "UAA client id")
	f.StringVar(&o.uaaSecretFile, "uaa-client-secret-file", "", "file holding the UAA client secret")
	f.StringVar(&o.uaaCA, "uaa-ca", "", "PEM of the CA the UAA's certificate is signed by")
	f.StringVar(&o.uaaPublicKey, "uaa-public-key", "", "PEM of the UAA's token signing key: tokens are verified when set")
}

// trusting is an HTTP client trusting the CA of pem (flag names it), or
// the system's CAs when it is empty.
func trusting(flag, pem string) (*http.Client, error) {
	var pool *x509.CertPool
	if pem != "" {
		pool = x509.NewCertPool()
		if !pool.AppendCertsFromPEM([]byte(pem)) {
			return nil, fmt.Errorf("%s: no PEM certificate", flag)
		}
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return &http.Client{Transport: transport, Timeout: time.Minute}, nil
}

// configServer is the gathering's config server, nil without a URL.
func (o *configServerFlags) configServer() (*gathering.ConfigServer, error) {
	if o.url == "" {
		return nil, nil
	}
	if o.deployment == "" {
		return nil, fmt.Errorf("--config-server-url needs --deployment-name")
	}
	httpClient, err := trusting("--config-server-ca", o.ca)
	if err != nil {
		return nil, err
	}
	var tokens director.Tokens
	switch {
	case o.uaaURL != "":
		secret, err := os.ReadFile(o.uaaSecretFile)
		if err != nil {
			return nil, fmt.Errorf("--uaa-client-secret-file: %w", err)
		}
		uaa, err := trusting("--uaa-ca", o.uaaCA)
		if err != nil {
			return nil, err
		}
		cc := &director.ClientCredentials{TokenURL: o.uaaURL + "/oauth/token", ClientID: o.uaaClientID, ClientSecret: strings.TrimSpace(string(secret)), HTTP: uaa}
		if o.uaaPublicKey != "" {
			if cc.PublicKey, err = jwt.ParseRSAPublicKeyFromPEM([]byte(o.uaaPublicKey)); err != nil {
				return nil, fmt.Errorf("--uaa-public-key: %w", err)
			}
		}
		tokens = cc
	case o.tokenFile != "":
		tokens = director.TokenFile(o.tokenFile)
	}
	c, err := director.NewClient(o.url, httpClient, tokens)
	if err != nil {
		return nil, err
	}
	return &gathering.ConfigServer{Client: c, Director: o.director, Deployment: o.deployment}, nil
}

// fail reports a director-format error list on stdout and in the
// termination log (so `kubectl describe pod` shows it) and exits with code.
func fail(cmd *cobra.Command, terminationLog string, err error, code int) error {
	fmt.Fprintln(cmd.OutOrStdout(), err)
	if terminationLog != "" {
		if werr := os.WriteFile(terminationLog, []byte(err.Error()+"\n"), 0o644); werr != nil {
			fmt.Fprintln(cmd.ErrOrStderr(), "writing the termination log:", werr)
		}
	}
	return exitError{code: code}
}

// gatherExitCode tells the gathering Job whether a retry can help:
// status.ExitTransient for an error of the API server or of reaching it,
// else status.ExitInvalidInput.
func gatherExitCode(err error) int {
	var gst apierrors.APIStatus
	if (errors.As(err, &gst) && !apierrors.IsNotFound(err)) || errors.As(err, new(*url.Error)) || errors.As(err, new(*net.OpError)) || errors.As(err, new(*director.Unreachable)) {
		return status.ExitTransient
	}
	return status.ExitInvalidInput
}

// restConfig loads a kubeconfig: the given file, else $KUBECONFIG or
// ~/.kube/config, else the in-cluster configuration.
func restConfig(kubeconfig string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	c, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	if c.QPS == 0 {
		// client-go's default of 5 requests a second would make a group of
		// a thousand instances a minutes-long gathering (a Service each);
		// the API server's priority and fairness limits us instead, as
		// controller-runtime's config does.
		c.QPS = -1
	}
	return c, nil
}
