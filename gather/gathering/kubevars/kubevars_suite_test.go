package kubevars_test

import (
	"context"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/bosh-injector/bosh-injector/test/controlplane"
)

func TestKubevars(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Variables in Secrets")
}

var (
	cp  *controlplane.ControlPlane
	ctx = context.Background()
)

var _ = BeforeSuite(func() { cp = controlplane.StartForSuite(controlplane.Options{}) })
var _ = AfterEach(func() { cp.LogsOnFailure() })
