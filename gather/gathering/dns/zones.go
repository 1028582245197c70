package dns

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/bosh-injector/bosh-injector/gather/names"
)

// ZoneFilePrefix starts the name of every zone file in the directory
// CoreDNS's auto plugin loads ("db.<origin>", its default pattern).
const ZoneFilePrefix = "db."

// ZoneFiles maps each zone file name to its content: the latest version of
// every deployment's DNS records among cms. A ConfigMap serves only the zone
// of its own namespace and deployment label: whoever may create ConfigMaps
// in one namespace must not answer the names of another's deployments. One
// claiming another zone, or including a file of the CoreDNS container
// (which CoreDNS's zone parser allows), is none of gathering's and is
// ignored.
func ZoneFiles(cms []corev1.ConfigMap) map[string][]byte {
	latest := map[string]*corev1.ConfigMap{}
	for i := range cms {
		cm := &cms[i]
		dep := cm.Labels[names.LabelDeployment]
		if dep == "" || cm.Namespace == "" || Version(cm) < 1 {
			continue
		}
		origin := names.DNSZone(dep, cm.Namespace)
		if cm.Data[names.DNSZoneKey] != origin || strings.Contains(strings.ToUpper(cm.Data[names.DNSRecordsKey]), "$INCLUDE") {
			continue
		}
		if have := latest[origin]; have == nil || Version(cm) > Version(have) {
			latest[origin] = cm
		}
	}
	out := map[string][]byte{}
	for origin, cm := range latest {
		out[ZoneFilePrefix+origin] = []byte(cm.Data[names.DNSRecordsKey])
	}
	return out
}

// Sync makes dir hold exactly files: changed files are replaced atomically
// (CoreDNS never reads half a zone), other zone files removed.
func Sync(dir string, files map[string][]byte) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		if _, keep := files[e.Name()]; !keep && strings.HasPrefix(e.Name(), ZoneFilePrefix) {
			errs = append(errs, os.Remove(filepath.Join(dir, e.Name())))
		}
	}
	for name, data := range files {
		path := filepath.Join(dir, name)
		if have, err := os.ReadFile(path); err == nil && bytes.Equal(have, data) {
			continue
		}
		// The temporary name does not match the zone file pattern.
		tmp := filepath.Join(dir, ".tmp-"+name)
		if err := os.WriteFile(tmp, data, 0o644); err != nil {
			errs = append(errs, err)
			continue
		}
		errs = append(errs, os.Rename(tmp, path))
	}
	return errors.Join(errs...)
}

// SyncOptions configure RunSync.
type SyncOptions struct {
	// Dir is the directory CoreDNS's auto plugin loads zones from.
	Dir string
	// Namespaces, when set, are the only namespaces whose records are read.
	Namespaces []string
}

// RunSync keeps opts.Dir holding the latest DNS records of every
// deployment in the cluster until ctx ends: the CoreDNS pod's sidecar.
func RunSync(ctx context.Context, cfg *rest.Config, opts SyncOptions, log logr.Logger) error {
	ctrl.SetLogger(log)
	cacheOptions := cache.Options{ByObject: map[client.Object]cache.ByObject{
		&corev1.ConfigMap{}: {Label: labels.SelectorFromSet(labels.Set(Selector))},
	}}
	for _, ns := range opts.Namespaces {
		if cacheOptions.DefaultNamespaces == nil {
			cacheOptions.DefaultNamespaces = map[string]cache.Config{}
		}
		cacheOptions.DefaultNamespaces[ns] = cache.Config{}
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Cache:   cacheOptions,
		Metrics: metricsserver.Options{BindAddress: "0"},
	})
	if err != nil {
		return err
	}
	err = ctrl.NewControllerManagedBy(mgr).Named("dns-zones").For(&corev1.ConfigMap{}).
		Complete(reconcile.Func(func(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
			// Every event rewrites the whole directory from the cache: the
			// zones are few and small, and no event can be missed.
			var list corev1.ConfigMapList
			if err := mgr.GetClient().List(ctx, &list, Selector); err != nil {
				return reconcile.Result{}, err
			}
			if err := Sync(opts.Dir, ZoneFiles(list.Items)); err != nil {
				return reconcile.Result{}, fmt.Errorf("writing zone files to %s: %w", opts.Dir, err)
			}
			return reconcile.Result{}, nil
		}))
	if err != nil {
		return err
	}
	return mgr.Start(ctx)
}
