package manager

import (
	"fmt"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/bosh-injector/bosh-injector/gather/operator/disks"
	"github.com/bosh-injector/bosh-injector/gather/operator/disruption"
)

// setupDisks adds the persistent disk controller (resize, orphaned disks)
// beside the deploy controller it follows the order of.
func setupDisks(mgr ctrl.Manager, o Options, groups *disruption.Groups, log logr.Logger) error {
	r := &disks.Reconciler{
		Client:      mgr.GetClient(),
		APIReader:   mgr.GetAPIReader(),
		Recorder:    mgr.GetEventRecorder("bosh-injector"),
		Log:         log.WithName("disks"),
		Config:      disks.Config{Retention: o.OrphanedDiskRetention},
		Disruptions: groups,
	}
	if err := r.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("disk controller: %w", err)
	}
	return nil
}
