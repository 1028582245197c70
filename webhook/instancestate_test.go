package webhook_test

import (
	"fmt"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bosh-injector/bosh-injector/gather/names"
)

var _ = Describe("the webhook and a stopped instance", func() {
	It("gives every new pod of an instance recorded stopped on the manifest Secret its stopped state, and the others none", func() {
		ns := "webhook-stopped"
		Expect(cp.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		storeInfo(ns, webInfo)
		manifest := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "shop-manifest", Namespace: ns, Labels: map[string]string{names.LabelDeployment: "shop"},
			Annotations: map[string]string{
				names.AnnotationDeploy:              `{"phase":"Deployed","instances":{"web-z1":2}}`,
				names.AnnotationStopped("web-z1-1"): "web/1",
			}}, Data: map[string][]byte{names.ManifestKey: []byte("name: shop\n")}}
		Expect(cp.Client.Create(ctx, manifest)).To(Succeed())
		Eventually(func() map[string]string {
			var s corev1.Secret
			_ = operatorCache.Get(ctx, client.ObjectKeyFromObject(manifest), &s)
			return s.Annotations
		}).Should(HaveKey(names.AnnotationStopped("web-z1-1")))
		labels := map[string]string{names.LabelDeployment: "shop", names.LabelInstanceGroup: "web", names.LabelAZIndex: "1"}
		Expect(cp.Client.Create(ctx, statefulSet(ns, "web-z1", labels, 2))).To(Succeed())
		desired := func() (map[string]string, error) {
			list, err := pods(ns, client.MatchingLabels{names.LabelInstanceGroup: "web"})()
			out := map[string]string{}
			for _, p := range list {
				out[p.Name+" "+string(p.UID)] = p.Annotations[names.AnnotationDesiredState]
			}
			return out, err
		}
		Eventually(desired).Should(HaveLen(2))
		first, _ := desired()
		for key, state := range first {
			want := ""
			if strings.HasPrefix(key, "web-z1-1 ") {
				want = names.DesiredStopped
			}
			Expect(state).To(Equal(want), key)
		}

		// replace deletes web-z1-1's pod and returns its replacement's
		// annotations, once there.
		replace := func() func() (map[string]string, error) {
			GinkgoHelper()
			var old corev1.Pod
			Expect(cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web-z1-1"}, &old)).To(Succeed())
			Expect(cp.Client.Delete(ctx, &old)).To(Succeed())
			return func() (map[string]string, error) {
				var p corev1.Pod
				err := cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web-z1-1"}, &p)
				if err == nil && p.UID == old.UID {
					err = fmt.Errorf("pod %s not replaced yet", old.Name)
				}
				return p.Annotations, err
			}
		}

		// The stopped instance's pod replaced: its new pod starts stopped.
		Eventually(replace()).Should(HaveKeyWithValue(names.AnnotationDesiredState, names.DesiredStopped))

		// Started: the record is gone, the next pod runs.
		patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:null}}}`, names.AnnotationStopped("web-z1-1"))
		Expect(cp.Client.Patch(ctx, manifest, client.RawPatch(types.MergePatchType, patch))).To(Succeed())
		Eventually(func() map[string]string {
			var s corev1.Secret
			_ = operatorCache.Get(ctx, client.ObjectKeyFromObject(manifest), &s)
			return s.Annotations
		}).ShouldNot(HaveKey(names.AnnotationStopped("web-z1-1")))
		Eventually(replace()).Should(And(HaveKey(names.AnnotationInjected), Not(HaveKey(names.AnnotationDesiredState))))
	})
})
