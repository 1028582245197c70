package rollout_test

import (
	"context"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/bosh-injector/bosh-injector/test/controlplane"
)

func TestDeploy(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Deploy controller")
}

var (
	cp  *controlplane.ControlPlane
	ctx = context.Background()
)

// The StatefulSet controller runs; no scheduler or kubelet does: the specs
// play the kubelet, reporting pods Ready (or not), so that they decide
// when an instance is running.
var _ = BeforeSuite(func() {
	cp = controlplane.StartForSuite(controlplane.Options{ControllerManager: true, Controllers: []string{"statefulset-controller"}})
})

var _ = AfterEach(func() { cp.LogsOnFailure() })
