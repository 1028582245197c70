package controlplane

import (
	"context"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// StartForSuite starts a control plane from a ginkgo BeforeSuite. It fails
// the suite with the reason (for missing binaries: run `make testbin`), stops
// every process in the suite's cleanup (Ginkgo runs cleanup on interrupt
// too), and prints the control plane's logs after any failed spec.
//
// It also raises Eventually's default timeout from 1 s to 10 s: the suites
// share two cores with other packages' clusters, where a controller's
// second of latency is no failure. Controller-runtime's own logs go to the
// GinkgoWriter, shown with a failed spec.
func StartForSuite(opts Options) *ControlPlane {
	gomega.SetDefaultEventuallyTimeout(10 * time.Second)
	ctrllog.SetLogger(ginkgo.GinkgoLogr)
	cp, err := Start(opts)
	gomega.Expect(err).NotTo(gomega.HaveOccurred(), "starting the test control plane")
	ginkgo.GinkgoWriter.Printf("control plane logs in %s\n", cp.LogDir)
	ginkgo.DeferCleanup(func() {
		gomega.Expect(cp.Stop()).To(gomega.Succeed())
		if !suiteFailed {
			_ = cp.Cleanup()
		}
	})
	return cp
}

// suiteFailed is set once a spec fails, so the logs are kept for a look.
var suiteFailed bool

// LogsOnFailure prints the control plane's recent logs to the GinkgoWriter
// when the current spec failed. Suites call it from AfterEach:
//
//	AfterEach(func() { cp.LogsOnFailure() })
func (cp *ControlPlane) LogsOnFailure() {
	if cp == nil || !ginkgo.CurrentSpecReport().Failed() {
		return
	}
	suiteFailed = true
	ginkgo.GinkgoWriter.Println(cp.logTails(60))
}

// ExpectNothingLeaked fails the spec when logs (the operator's) tell of a
// panic, which controller-runtime recovers from in reconcilers and
// webhooks and logs, or when any of values (generated credentials) shows
// in logs or in what is Visible of namespace.
func (cp *ControlPlane) ExpectNothingLeaked(namespace, logs string, values ...string) {
	ginkgo.GinkgoHelper()
	gomega.Expect(logs).NotTo(gomega.ContainSubstring("panic"), "the operator's log tells of a panic")
	visible, err := cp.Visible(context.Background(), namespace)
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	gomega.Expect(values).NotTo(gomega.BeEmpty())
	for _, v := range values {
		gomega.Expect(v).NotTo(gomega.BeEmpty())
		gomega.Expect(visible).NotTo(gomega.ContainSubstring(v), "a Pod or an Event of namespace %s holds a generated value", namespace)
		gomega.Expect(logs).NotTo(gomega.ContainSubstring(v), "the operator logged a generated value")
	}
}
