package gathering_test

import (
	"context"
	"sync/atomic"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

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

// countingClient is a client of the control plane that counts the writes
// made through it.
func countingClient() (client.Client, *atomic.Int64) {
	c, err := client.NewWithWatch(cp.Config, client.Options{})
	Expect(err).NotTo(HaveOccurred())
	return counting(c)
}

func counting(c client.WithWatch) (client.Client, *atomic.Int64) {
	var n atomic.Int64
	return interceptor.NewClient(c, interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			n.Add(1)
			return c.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			n.Add(1)
			return c.Update(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			n.Add(1)
			return c.Patch(ctx, obj, patch, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			n.Add(1)
			return c.Delete(ctx, obj, opts...)
		},
	}), &n
}
