package gathering_test

import (
	"context"
	"path/filepath"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/bosh-injector/bosh-injector/test/controlplane"
	"github.com/bosh-injector/bosh-injector/test/releaseimage"
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

const fixtures = "../../test/fixtures"

var _ = BeforeSuite(func() {
	cp = controlplane.StartForSuite(controlplane.Options{})
	// The fixture releases as the copy init containers leave them.
	jobsDir = GinkgoT().TempDir()
	for _, r := range []string{"bus", "store", "shop"} {
		Expect(releaseimage.LayoutJobs(filepath.Join(fixtures, "releases", r), filepath.Join(jobsDir, r))).To(Succeed())
	}
})

var _ = AfterEach(func() { cp.LogsOnFailure() })
