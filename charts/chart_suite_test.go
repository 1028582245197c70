// Package charts_test checks the Helm chart: its rendering against a golden
// file, `helm lint`, and a real `helm install` on the test control plane with
// cert-manager issuing the webhook certificate.
package charts_test

import (
	"context"
	"flag"
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/bosh-injector/bosh-injector/test/controlplane"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func TestChart(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Helm chart")
}

var (
	cp         *controlplane.ControlPlane
	ctx        = context.Background()
	kubeconfig string
)

var _ = BeforeSuite(func() {
	cp = controlplane.StartForSuite(controlplane.Options{CertManager: true, ControllerManager: true})
	var err error
	kubeconfig, err = cp.KubeconfigFile("helm")
	Expect(err).NotTo(HaveOccurred())
})

var _ = AfterEach(func() { cp.LogsOnFailure() })

// helm runs the helm built by `make testbin` and returns its stdout; it
// fails the spec when helm fails.
func helm(args ...string) string {
	GinkgoHelper()
	out, err := helmErr(args...)
	Expect(err).NotTo(HaveOccurred())
	return out
}

// helmErr runs helm and returns its stdout, or an error holding its stderr.
func helmErr(args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(cp.BinDir, "helm"), args...)
	home := GinkgoT().TempDir()
	cmd.Env = append(cmd.Environ(), "KUBECONFIG="+kubeconfig, "HELM_CACHE_HOME="+home,
		"HELM_CONFIG_HOME="+home, "HELM_DATA_HOME="+home)
	out, err := cmd.Output()
	if exit, ok := err.(*exec.ExitError); ok {
		return "", fmt.Errorf("helm %v: %w: %s", args, err, exit.Stderr)
	}
	return string(out), err
}
