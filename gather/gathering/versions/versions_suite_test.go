package versions_test

import (
	"context"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/bosh-injector/bosh-injector/test/controlplane"
)

func TestVersions(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Versioned Secrets")
}

var (
	cp  *controlplane.ControlPlane
	ctx = context.Background()
)

// The StatefulSet controller writes the template revisions that pruning
// must keep versions for.
var _ = BeforeSuite(func() {
	cp = controlplane.StartForSuite(controlplane.Options{ControllerManager: true, Controllers: []string{"statefulset-controller"}})
})
var _ = AfterEach(func() { cp.LogsOnFailure() })
