package walkthrough

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/bosh-injector/bosh-injector/test/controlplane"
)

// Pointed at a cluster without cert-manager, the walkthrough stops before
// installing anything and says what to do.
func TestClusterWithoutCertManager(t *testing.T) {
	cp, err := controlplane.Start(controlplane.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cp.Stop(); _ = cp.Cleanup() })
	kubeconfig, err := cp.KubeconfigFile("demo")
	if err != nil {
		t.Fatal(err)
	}
	w, err := Start(context.Background(), Options{Out: io.Discard, Kubeconfig: kubeconfig, Registry: "registry.example.com/me", Dir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "install cert-manager first") {
		t.Fatalf("error %v, want one saying to install cert-manager", err)
	}
	if w.installed {
		t.Error("the chart was installed")
	}
	if err := w.Stop(); err != nil {
		t.Error(err)
	}
}
