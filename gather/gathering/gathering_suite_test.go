package gathering_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/bosh-injector/bosh-injector/gather/gathering"
	"github.com/bosh-injector/bosh-injector/gather/model/deployment"
	"github.com/bosh-injector/bosh-injector/gather/names"
	"github.com/bosh-injector/bosh-injector/gather/operator/runner"
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

// gatherAccepted gathers as the job runner's Job does: with the plan the
// runner would give it (the namespace is its own trust namespace here),
// and accepts what it wrote and deletes the links no longer shared, as the
// runner does when the Job succeeds.
func gatherAccepted(c client.Client, cfg gathering.Config, render gathering.RenderBPM) (*gathering.Result, error) {
	res, _, err := gatherTimed(c, cfg, render)
	return res, err
}

// phases are how long a gathering took (the Job's own run) and the job
// runner's parts around it (the plan before, the acceptance after).
type phases struct{ gather, runner time.Duration }

// gatherTimed is gatherAccepted, timing its phases.
func gatherTimed(c client.Client, cfg gathering.Config, render gathering.RenderBPM) (*gathering.Result, phases, error) {
	var took phases
	start := time.Now()
	var manifest corev1.Secret
	if err := cp.Client.Get(ctx, client.ObjectKey{Namespace: cfg.Namespace, Name: cfg.ManifestSecret}, &manifest); err != nil {
		return nil, took, err
	}
	dep := manifest.Labels[names.LabelDeployment]
	inputs, err := runner.Inspect(manifest.Data[names.ManifestKey], deployment.OpsFilesOf(manifest.Data))
	if err != nil {
		return nil, took, err
	}
	if cfg.Plan, err = gathering.NewPlan(ctx, cp.Client, cfg.Namespace, cfg.Namespace, dep, "", inputs.Consumes, inputs.AliasTargets); err != nil {
		return nil, took, err
	}
	planned := time.Now()
	res, err := gathering.Run(ctx, c, cfg, render, time.Now())
	took.gather = time.Since(planned)
	if err != nil {
		return res, took, err
	}
	_, refused, err := runner.AcceptReport(ctx, cp.Client, cfg.Namespace, cfg.Namespace, dep, uuid.NewUUID(), "", res.Report())
	if err == nil && len(refused) > 0 {
		err = fmt.Errorf("not accepted: %v", refused)
	}
	took.runner = time.Since(start) - took.gather
	return res, took, err
}
