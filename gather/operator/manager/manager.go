// Package manager starts the operator: one controller-runtime manager
// serving the admission webhook (package webhook) and running the
// controllers (the job runner, the deploy controller, the disk controller),
// with the cache they share.
package manager

import (
	"context"
	"fmt"
	"net"
	"os"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/bosh-injector/bosh-injector/gather/names"
	"github.com/bosh-injector/bosh-injector/gather/operator/disruption"
	"github.com/bosh-injector/bosh-injector/gather/operator/rollout"
	"github.com/bosh-injector/bosh-injector/gather/operator/runner"
	"github.com/bosh-injector/bosh-injector/inject"
	"github.com/bosh-injector/bosh-injector/webhook"
)

// Options configure the operator.
type Options struct {
	// Namespace is the operator's own: its pods are never injected and its
	// leader election lease lives there.
	Namespace     string
	OperatorImage string
	ClusterDomain string
	// DrainSeconds bounds an instance's pre-stop and drain scripts; see
	// inject.Settings.
	DrainSeconds int
	// OrphanedDiskRetention is how long an orphaned claim is kept
	// (disks.DefaultRetention when 0).
	OrphanedDiskRetention time.Duration
	// Host, Port and CertDir (tls.crt, tls.key, reloaded when they change)
	// of the webhook server.
	Host    string
	Port    int
	CertDir string
	// MetricsPort and HealthPort; 0 disables the endpoint.
	MetricsPort, HealthPort int
	// LeaderElection keeps the controllers to one replica; every replica
	// serves the webhook.
	LeaderElection bool
	// Webhook serves the admission webhooks; Runner runs the controllers:
	// the gathering job runner, the deploy controller and the disk
	// controller. The operator runs both.
	Webhook, Runner bool
	// DNSService names the CoreDNS Service in Namespace that injected pods
	// resolve names with; empty leaves their DNS as it is.
	DNSService string
	// ReleaseJobs is how injected pods get the release images' jobs:
	// inject.ReleaseJobsCopy (when empty), inject.ReleaseJobsImage, or
	// ReleaseJobsAuto, decided once at start from the API server's version
	// and the nodes.
	ReleaseJobs string
	// User is the operator's user name as the apiserver authenticates it,
	// whose StatefulSet updates the webhook leaves unpaced; the webhook
	// asks the apiserver when empty.
	User string
	// WatchNamespaces, when set, are the only namespaces the operator
	// caches and works in (the chart then grants it Roles there only).
	WatchNamespaces []string
	// ConfigServer is where gatherings read and generate variables.
	ConfigServer runner.ConfigServer
}

// Run runs the operator until ctx ends.
func Run(ctx context.Context, cfg *rest.Config, o Options, log logr.Logger) error {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(GCPercent)
	}
	mgr, err := New(cfg, o, log)
	if err != nil {
		return err
	}
	return mgr.Start(ctx)
}

// GCPercent is the operator's GOGC unless the environment sets one. An
// admission allocates copies of the pod (decode, the copy the patch is
// taken against, mutate, the patch); at Go's default of 100 the collector's
// assists and pauses land on concurrent admissions (BenchmarkAdmission
// compares both in one run). The chart bounds the heap with GOMEMLIMIT at the memory limit.
const GCPercent = 400

// New builds the operator's manager.
func New(cfg *rest.Config, o Options, log logr.Logger) (ctrl.Manager, error) {
	ctrl.SetLogger(log)
	switch inject.ReleaseJobs(o.ReleaseJobs) {
	case "", inject.ReleaseJobsCopy, inject.ReleaseJobsImage, ReleaseJobsAuto:
	default:
		return nil, fmt.Errorf("release jobs %q: want %s, %s or %s", o.ReleaseJobs, ReleaseJobsAuto, inject.ReleaseJobsImage, inject.ReleaseJobsCopy)
	}
	cacheOptions, err := CacheOptions(o.Namespace)
	if err != nil {
		return nil, err
	}
	if len(o.WatchNamespaces) > 0 {
		cacheOptions.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range o.WatchNamespaces {
			cacheOptions.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Logger:                        log,
		Cache:                         cacheOptions,
		Metrics:                       metricsserver.Options{BindAddress: address(o.MetricsPort)},
		HealthProbeBindAddress:        address(o.HealthPort),
		LeaderElection:                o.LeaderElection,
		LeaderElectionID:              "bosh-injector-runner",
		LeaderElectionNamespace:       o.Namespace,
		LeaderElectionReleaseOnCancel: true,
		WebhookServer:                 crwebhook.NewServer(crwebhook.Options{Host: o.Host, Port: o.Port, CertDir: o.CertDir}),
		// A process runs one manager; the tests run several replicas in
		// one process, which the name check (for metrics) would refuse.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		return nil, err
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, err
	}
	if o.Webhook {
		settings := inject.Settings{OperatorImage: o.OperatorImage, DrainSeconds: o.DrainSeconds, DNS: inject.DNS{ClusterDomain: o.ClusterDomain},
			ReleaseJobs: inject.ReleaseJobs(o.ReleaseJobs)}
		if o.ReleaseJobs == ReleaseJobsAuto {
			var why string
			settings.ReleaseJobs, why = detectReleaseJobs(context.Background(), cfg)
			log.Info("release jobs", "mode", settings.ReleaseJobs, "why", why)
		}
		hookServer := mgr.GetWebhookServer()
		hookServer.Register(webhook.Path, &crwebhook.Admission{Handler: &webhook.Handler{
			Cache:             mgr.GetCache(),
			Settings:          settings,
			DNSService:        o.DNSService,
			OperatorNamespace: o.Namespace,
			Recorder:          mgr.GetEventRecorder("bosh-injector-webhook"),
			Log:               log.WithName("webhook"),
		}})
		if o.User == "" {
			if o.User, err = whoAmI(context.Background(), cfg); err != nil {
				return nil, err
			}
		}
		hookServer.Register(webhook.StatefulSetPath, &crwebhook.Admission{Handler: &webhook.StatefulSets{Log: log.WithName("statefulsets"), Operator: o.User}})
		if err := mgr.AddReadyzCheck("webhook", hookServer.StartedChecker()); err != nil {
			return nil, err
		}
	}
	if o.Runner {
		r := &runner.Reconciler{
			Client:    mgr.GetClient(),
			APIReader: mgr.GetAPIReader(),
			Recorder:  mgr.GetEventRecorder("bosh-injector"),
			Log:       log.WithName("runner"),
			Config: runner.Config{
				OperatorImage:  o.OperatorImage,
				ClusterDomain:  o.ClusterDomain,
				TrustNamespace: o.Namespace,
				ConfigServer:   o.ConfigServer,
				JobTTL:         time.Hour,
				BackoffLimit:   2,
			},
		}
		if err := r.SetupWithManager(mgr); err != nil {
			return nil, fmt.Errorf("job runner: %w", err)
		}
		// The deploy and disk controllers take instances down one group
		// decision at a time.
		groups := &disruption.Groups{}
		d := &rollout.Reconciler{
			Client:      mgr.GetClient(),
			APIReader:   mgr.GetAPIReader(),
			Recorder:    mgr.GetEventRecorder("bosh-injector"),
			Log:         log.WithName("deploy"),
			Disruptions: groups,
		}
		if err := d.SetupWithManager(mgr); err != nil {
			return nil, fmt.Errorf("deploy controller: %w", err)
		}
		if err := setupDisks(mgr, o, groups, log); err != nil {
			return nil, err
		}
	}
	return mgr, nil
}

// CacheOptions is what the operator caches: only Secrets of deployments
// (BPM info for admissions, manifests and variables for the runner), the
// records of accepted versions in the operator's namespace, and the
// Services there (the DNS Service's cluster IP, read at each admission).
func CacheOptions(namespace string) (cache.Options, error) {
	deploymentSecrets, err := labels.NewRequirement(names.LabelDeployment, selection.Exists, nil)
	if err != nil {
		return cache.Options{}, err
	}
	return cache.Options{ByObject: map[client.Object]cache.ByObject{
		&corev1.Secret{}: {Label: labels.NewSelector().Add(*deploymentSecrets)},
		&corev1.ConfigMap{}: {
			Namespaces: map[string]cache.Config{namespace: {}},
			Label:      labels.SelectorFromSet(labels.Set{names.LabelManagedBy: names.ManagedBy}),
		},
		&corev1.Service{}: {Namespaces: map[string]cache.Config{namespace: {}}},
	}}, nil
}

func address(port int) string {
	if port == 0 {
		return "0"
	}
	return net.JoinHostPort("", strconv.Itoa(port))
}
