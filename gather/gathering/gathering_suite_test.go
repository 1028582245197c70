package gathering_test

import (
	"context"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/bosh-injector/bosh-injector/test/controlplane"
	"github.com/bosh-injector/bosh-injector/test/fixtures"
)

func TestGathering(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Gathering")
}

var (
	cp      *controlplane.ControlPlane
	ctx     = context.Background()
	jobsDir string
)

var _ = BeforeSuite(func() {
	cp = controlplane.StartForSuite(controlplane.Options{})
	// The fixture releases as the copy init containers leave them.
	jobsDir = GinkgoT().TempDir()
	Expect(fixtures.LayoutReleases(jobsDir)).To(Succeed())
})

var _ = AfterEach(func() { cp.LogsOnFailure() })
