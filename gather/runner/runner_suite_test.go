package runner_test

import (
	"context"
	"path/filepath"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/bosh-injector/bosh-injector/test/controlplane"
	"github.com/bosh-injector/bosh-injector/test/releaseimage"
)

func TestRunner(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Job runner")
}

const fixtures = "../../test/fixtures"

var (
	cp      *controlplane.ControlPlane
	ctx     = context.Background()
	jobsDir string
)

// No job-controller runs: the gathering Job's work is done by the test, which
// then reports the Job's completion as the controller would. The garbage
// collector runs, for owner references.
var _ = BeforeSuite(func() {
	cp = controlplane.StartForSuite(controlplane.Options{ControllerManager: true, Controllers: []string{"garbage-collector-controller"}})
	jobsDir = GinkgoT().TempDir()
	for _, r := range []string{"bus", "store", "shop"} {
		Expect(releaseimage.LayoutJobs(filepath.Join(fixtures, "releases", r), filepath.Join(jobsDir, r))).To(Succeed())
	}
})

var _ = AfterEach(func() { cp.LogsOnFailure() })
