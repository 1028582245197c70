package webhook_test

import (
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bosh-injector/bosh-injector/gather/gathering/objects"
	"github.com/bosh-injector/bosh-injector/gather/model/deployment"
	"github.com/bosh-injector/bosh-injector/gather/names"
	"github.com/bosh-injector/bosh-injector/test/fixtures"
)

// applyIn makes namespace ns and returns the real kubectl run there as the
// README's user, and the shop manifest.
func applyIn(ns string) (func(stdin []byte, args ...string) (string, error), []byte) {
	GinkgoHelper()
	Expect(cp.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	kubeconfig, err := cp.KubeconfigFile("readme-user")
	Expect(err).NotTo(HaveOccurred())
	manifest, err := fixtures.ShopManifest()
	Expect(err).NotTo(HaveOccurred())
	return func(stdin []byte, args ...string) (string, error) {
		cmd := exec.Command(filepath.Join(cp.BinDir, "kubectl"), append([]string{"--kubeconfig", kubeconfig, "--namespace", ns}, args...)...)
		cmd.Stdin = strings.NewReader(string(stdin))
		out, err := cmd.CombinedOutput()
		return string(out), err
	}, manifest
}

// The README's loop, with the real kubectl: `objects … | kubectl apply`,
// edit, apply again.
var _ = Describe("kubectl apply of what `objects` prints", func() {
	It("changes nothing when applied unchanged, also after the deploy controller's writes, and drops a removed ops file's key", func() {
		ns := "apply"
		kubectl, manifest := applyIn(ns)
		broken, err := os.ReadFile(filepath.Join(fixtures.Dir(), "deployments", "ops", "missing-bus-password.yml"))
		Expect(err).NotTo(HaveOccurred())
		dir := GinkgoT().TempDir()
		// apply prints kubectl apply's lines for objects' output of ops.
		apply := func(ops ...deployment.OpsFile) []string {
			GinkgoHelper()
			res, err := objects.Build(manifest, ops, objects.Options{})
			Expect(err).NotTo(HaveOccurred())
			yaml, err := objects.EncodeAll(res.Objects)
			Expect(err).NotTo(HaveOccurred())
			Expect(os.WriteFile(filepath.Join(dir, "objects.yaml"), yaml, 0o644)).To(Succeed())
			out, err := kubectl(yaml, "apply", "-f", "-")
			Expect(err).NotTo(HaveOccurred(), out)
			// kubectl diff exits 0 when the cluster holds what is applied.
			diff, err := kubectl(yaml, "diff", "-f", "-")
			Expect(err).NotTo(HaveOccurred(), diff)
			Expect(diff).To(BeEmpty())
			lines := strings.Split(strings.TrimSpace(out), "\n")
			Expect(lines).To(HaveLen(len(res.Objects)), "a line per object")
			return lines
		}
		unchanged := HaveEach(Satisfy(fixtures.AppliedUnchanged))
		secretKeys := func() []string {
			GinkgoHelper()
			var s corev1.Secret
			Expect(cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "shop-manifest"}, &s)).To(Succeed())
			return slices.Sorted(maps.Keys(s.Data))
		}

		withBroken := []deployment.OpsFile{{Name: "missing-bus-password.yml", Data: broken}}
		Expect(apply(withBroken...)).NotTo(BeEmpty())
		Expect(secretKeys()).To(Equal([]string{names.ManifestKey, objects.OpsKey(0, "missing-bus-password.yml")}))
		Expect(apply(withBroken...)).To(unchanged)

		// What the deploy controller writes (a partition, the resolved
		// version) is not objects' to print: apply keeps it.
		var sets appsv1.StatefulSetList
		Expect(cp.Client.List(ctx, &sets, client.InNamespace(ns))).To(Succeed())
		Expect(sets.Items).NotTo(BeEmpty())
		for i := range sets.Items {
			sts := &sets.Items[i]
			patch := client.MergeFrom(sts.DeepCopy())
			sts.Spec.UpdateStrategy.RollingUpdate.Partition = ptr.To[int32](1)
			sts.Spec.Template.Annotations[names.AnnotationResolvedVersion] = "2"
			Expect(cp.Client.Patch(ctx, sts, patch)).To(Succeed())
		}
		Expect(apply(withBroken...)).To(unchanged)
		Expect(cp.Client.Get(ctx, client.ObjectKeyFromObject(&sets.Items[0]), &sets.Items[0])).To(Succeed())
		Expect(sets.Items[0].Spec.Template.Annotations).To(HaveKeyWithValue(names.AnnotationResolvedVersion, "2"))
		Expect(*sets.Items[0].Spec.UpdateStrategy.RollingUpdate.Partition).To(BeEquivalentTo(1))

		// The ops file removed: its key goes.
		Expect(apply()).To(ContainElement("secret/shop-manifest configured"))
		Expect(secretKeys()).To(Equal([]string{names.ManifestKey}))
		Expect(apply()).To(unchanged)
	})
})

// A larger persistent_disk applied as users apply it (issue 48): kubectl's
// client-side apply patches the StatefulSet with its last-applied
// configuration.
var _ = Describe("a larger persistent disk applied with kubectl apply", func() {
	It("is recorded as the wanted size, also when applied again", func() {
		ns := "apply-resize"
		kubectl, manifest := applyIn(ns)
		apply := func(ops ...deployment.OpsFile) string {
			GinkgoHelper()
			res, err := objects.Build(manifest, ops, objects.Options{})
			Expect(err).NotTo(HaveOccurred())
			yaml, err := objects.EncodeAll(res.Objects)
			Expect(err).NotTo(HaveOccurred())
			out, err := kubectl(yaml, "apply", "-f", "-")
			Expect(err).NotTo(HaveOccurred(), out)
			return out
		}
		db := func() *appsv1.StatefulSet {
			GinkgoHelper()
			var sets appsv1.StatefulSetList
			Expect(cp.Client.List(ctx, &sets, client.InNamespace(ns))).To(Succeed())
			for i := range sets.Items {
				if sets.Items[i].Spec.Template.Labels[names.LabelInstanceGroup] == "db" {
					return &sets.Items[i]
				}
			}
			Fail("no db StatefulSet")
			return nil
		}
		apply()
		larger := []deployment.OpsFile{{Name: "larger-db.yml", Data: []byte("- type: replace\n  path: /instance_groups/name=db/persistent_disk\n  value: 2048\n")}}
		for range 2 {
			GinkgoWriter.Println(apply(larger...))
			s := db()
			Expect(s.Annotations).To(HaveKeyWithValue(names.AnnotationDiskSizes, `{"store":"2Gi"}`))
			Expect(s.Spec.VolumeClaimTemplates[0].Spec.Resources.Requests.Storage().String()).To(Equal("1Gi"))
		}
	})
})
