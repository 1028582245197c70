package disks_test

import (
	"context"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/bosh-injector/bosh-injector/test/controlplane"
)

func TestDisks(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Disk controller")
}

var (
	cp  *controlplane.ControlPlane
	ctx = context.Background()
)

// The StatefulSet controller makes pods and claims; no scheduler, kubelet,
// volume binder or resizer runs: the specs play them, binding claims,
// reporting pods Ready and growing capacities.
var _ = BeforeSuite(func() {
	cp = controlplane.StartForSuite(controlplane.Options{ControllerManager: true, Controllers: []string{"statefulset-controller"}})
})

var _ = AfterEach(func() { cp.LogsOnFailure() })
