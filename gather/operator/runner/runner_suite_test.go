package runner_test

import (
	"context"
	"os"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/bosh-injector/bosh-injector/cmd/bosh-injector/app"
	"github.com/bosh-injector/bosh-injector/test/controlplane"
	"github.com/bosh-injector/bosh-injector/test/fixtures"
)

// runOperatorEnv, set in a child's environment, makes this test binary
// the `bosh-injector` command with the child's arguments: the fault table
// runs the operator as a process it can kill.
const runOperatorEnv = "RUNNER_TEST_RUN_OPERATOR"

func TestMain(m *testing.M) {
	if os.Getenv(runOperatorEnv) != "" {
		os.Exit(app.Main(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

func TestRunner(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Job runner")
}

var (
	cp      *controlplane.ControlPlane
	ctx     = context.Background()
	jobsDir string
)

// No job-controller runs: the gathering Job's work is done by the test, which
// then reports the Job's completion as the controller would. The garbage
// collector runs, for owner references, and the StatefulSet controller, whose
// status the deploy controller plans from.
var _ = BeforeSuite(func() {
	cp = controlplane.StartForSuite(controlplane.Options{ControllerManager: true, Controllers: []string{"garbage-collector-controller", "statefulset-controller"}})
	jobsDir = GinkgoT().TempDir()
	Expect(fixtures.LayoutReleases(jobsDir)).To(Succeed())
})

var _ = AfterEach(func() { cp.LogsOnFailure() })
