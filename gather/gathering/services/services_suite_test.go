package services_test

import (
	"context"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/bosh-injector/bosh-injector/test/controlplane"
)

func TestServices(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Instance Services")
}

var (
	cp  *controlplane.ControlPlane
	ctx = context.Background()
)

var _ = BeforeSuite(func() { cp = controlplane.StartForSuite(controlplane.Options{}) })
var _ = AfterEach(func() { cp.LogsOnFailure() })
