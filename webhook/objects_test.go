package webhook_test

import (
	"fmt"
	"path/filepath"
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bosh-injector/bosh-injector/gather/client/errand"
	"github.com/bosh-injector/bosh-injector/gather/gathering"
	"github.com/bosh-injector/bosh-injector/gather/gathering/objects"
	"github.com/bosh-injector/bosh-injector/gather/gathering/trust"
	"github.com/bosh-injector/bosh-injector/gather/names"
	"github.com/bosh-injector/bosh-injector/gather/render/ruby"
	"github.com/bosh-injector/bosh-injector/test/fixtures"
)

var _ = Describe("the objects `bosh-injector objects` prints", func() {
	It("run every instance of the shop deployment (its errand as run-errand runs it), each injected once with its own index", func() {
		ns := "objects"
		// The manifest Secret first, gathered as the job runner's Job would,
		// then the workloads.
		res, jobsDir := shopObjects(ns)
		gatherAccepted(ns, res, jobsDir)
		for _, o := range res.Objects[1:] {
			Expect(cp.Client.Create(ctx, o)).To(Succeed(), o.GetName())
			// An errand's Job is a suspended template; its instance runs
			// in the Job run-errand makes of it.
			if j, ok := o.(*batchv1.Job); ok {
				Expect(cp.Client.Create(ctx, errand.RunJob(j, 1, 1))).To(Succeed(), o.GetName())
			}
		}

		want := map[string]int{"bus": 3, "db": 1, "web": 2, "smoke-tests": 1}
		podNames := func() ([]string, error) {
			list, err := pods(ns, client.MatchingLabels{names.LabelDeployment: "shop"})()
			var out []string
			for _, p := range list {
				out = append(out, p.Name)
			}
			return out, err
		}
		Eventually(podNames).WithTimeout(time.Minute).Should(HaveLen(7), func() string {
			var events corev1.EventList
			_ = cp.Client.List(ctx, &events, client.InNamespace(ns))
			var msgs []string
			for _, e := range events.Items {
				msgs = append(msgs, e.InvolvedObject.Name+": "+e.Reason+": "+e.Message)
			}
			return fmt.Sprint(msgs)
		})
		list, err := pods(ns, client.MatchingLabels{names.LabelDeployment: "shop"})()
		Expect(err).NotTo(HaveOccurred())
		indexes := map[string][]string{}
		for _, p := range list {
			Expect(p.Annotations).To(HaveKey(names.AnnotationInjected), p.Name)
			Expect(p.Spec.InitContainers).To(ContainElement(HaveField("Name", "render")), p.Name)
			g := p.Labels[names.LabelInstanceGroup]
			indexes[g] = append(indexes[g], p.Labels[names.LabelInstanceIndex])
			// The template's one container is the one the webhook completed.
			Expect(p.Spec.Containers).To(ContainElement(And(
				HaveField("Name", p.Spec.Containers[0].Name),
				HaveField("Command", Not(BeEmpty())))), p.Name)
		}
		for g, n := range want {
			var all []string
			for i := range n {
				all = append(all, strconv.Itoa(i))
			}
			Expect(indexes[g]).To(ConsistOf(all), fmt.Sprintf("indexes of %s", g))
		}
	})
})

// shopObjects creates namespace ns and in it the shop deployment's manifest
// Secret as `objects` prints it, and lays the fixture releases out as the
// copy init containers leave them; it returns the objects and that
// directory.
func shopObjects(ns string) (*objects.Result, string) {
	GinkgoHelper()
	Expect(cp.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	manifest, err := fixtures.ShopManifest()
	Expect(err).NotTo(HaveOccurred())
	res, err := objects.Build(manifest, nil, objects.Options{Namespace: ns})
	Expect(err).NotTo(HaveOccurred())
	Expect(cp.Client.Create(ctx, res.Objects[0])).To(Succeed())
	jobsDir := filepath.Join(GinkgoT().TempDir(), "jobs-src")
	Expect(fixtures.LayoutReleases(jobsDir)).To(Succeed())
	return &res, jobsDir
}

// gatherAccepted gathers the manifest Secret of res from jobsDir with the
// gathering Job's code and accepts what it wrote, as the job runner does
// when that Job succeeds.
func gatherAccepted(ns string, res *objects.Result, jobsDir string) *trust.Record {
	GinkgoHelper()
	plan, err := gathering.NewPlan(ctx, cp.Client, operatorNamespace, ns, "shop", "", nil, nil)
	Expect(err).NotTo(HaveOccurred())
	gathered, err := gathering.Run(ctx, cp.Client, gathering.Config{
		Namespace: ns, ManifestSecret: res.Objects[0].GetName(), JobsDir: jobsDir, ClusterDomain: "cluster.local", Plan: plan,
	}, gathering.NewRenderBPM(ctx, ruby.Renderer{}), time.Now())
	Expect(err).NotTo(HaveOccurred())
	rec, refused, err := trust.Accept(ctx, cp.Client, operatorNamespace, ns, "shop", types.UID(ns+"-gathering"), gathered.Written())
	Expect(err).NotTo(HaveOccurred())
	Expect(refused).To(BeEmpty())
	return rec
}
