package versions_test

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bosh-injector/bosh-injector/gather/gathering/versions"
	"github.com/bosh-injector/bosh-injector/gather/names"
)

var _ = Describe("versioned Secrets", func() {
	var key versions.Key
	var n int
	BeforeEach(func() {
		n++
		ns := fmt.Sprintf("versions-%d", n)
		Expect(cp.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		key = versions.Key{Namespace: ns, Deployment: "My_Dep", Kind: names.KindBPM, InstanceGroup: "web_ig"}
	})

	write := func(content string) versions.Result {
		GinkgoHelper()
		r, err := versions.Write(ctx, cp.Client, versions.Desired{Key: key, Data: map[string][]byte{"k": []byte(content)}})
		Expect(err).NotTo(HaveOccurred())
		return r
	}

	It("creates v1, reuses it for the same content, and creates v2 on change", func() {
		Expect(write("a")).To(Equal(versions.Result{Name: "my-dep.bpm.web-ig-v1", Number: 1, Created: true}))
		Expect(write("a")).To(Equal(versions.Result{Name: "my-dep.bpm.web-ig-v1", Number: 1}))
		Expect(write("b")).To(Equal(versions.Result{Name: "my-dep.bpm.web-ig-v2", Number: 2, Created: true}))

		var s corev1.Secret
		Expect(cp.Client.Get(ctx, client.ObjectKey{Namespace: key.Namespace, Name: "my-dep.bpm.web-ig-v2"}, &s)).To(Succeed())
		Expect(*s.Immutable).To(BeTrue())
		Expect(s.Labels).To(Equal(map[string]string{
			names.LabelDeployment: "my-dep", names.LabelInstanceGroup: "web-ig",
			names.LabelSecretKind: names.KindBPM, names.LabelVersion: "2",
		}))
		Expect(s.Annotations).To(HaveKeyWithValue(names.AnnotationDeploymentName, "My_Dep"))
		Expect(s.Annotations).To(HaveKeyWithValue(names.AnnotationInstanceGroupName, "web_ig"))
	})

	It("keeps other series apart", func() {
		write("a")
		other := key
		other.Kind = names.KindResolved
		r, err := versions.Write(ctx, cp.Client, versions.Desired{Key: other, Data: map[string][]byte{"k": []byte("a")}})
		Expect(err).NotTo(HaveOccurred())
		Expect(r).To(Equal(versions.Result{Name: "my-dep.ig-resolved.web-ig-v1", Number: 1, Created: true}))
	})

	It("prunes all but the newest three and any version a pod still mounts", func() {
		for _, c := range []string{"1", "2", "3", "4", "5", "6"} {
			write(c)
		}
		// A pod labelled with the unsanitized BOSH names still mounts v2.
		Expect(cp.Client.Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: key.Namespace, Labels: map[string]string{
				names.LabelDeployment: "My_Dep", names.LabelInstanceGroup: "web_ig"}},
			Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "c", Image: "x"}},
				Volumes: []corev1.Volume{{Name: "r", VolumeSource: corev1.VolumeSource{
					Secret: &corev1.SecretVolumeSource{SecretName: "my-dep.bpm.web-ig-v2"}}}},
			},
		})).To(Succeed())

		// The deployment's series are read in one List, as gathering does.
		stored, err := versions.ListDeployment(ctx, cp.Client, key.Namespace, key.Deployment)
		Expect(err).NotTo(HaveOccurred())
		deleted, err := versions.Prune(ctx, cp.Client, key.Namespace, key.Deployment, stored.Of(key))
		Expect(err).NotTo(HaveOccurred())
		Expect(deleted).To(ConsistOf("my-dep.bpm.web-ig-v1", "my-dep.bpm.web-ig-v3"))
		left, err := versions.List(ctx, cp.Client, key)
		Expect(err).NotTo(HaveOccurred())
		var numbers []int
		for _, v := range left {
			numbers = append(numbers, v.Number)
		}
		Expect(numbers).To(Equal([]int{2, 4, 5, 6}))
		Expect(write("7").Number).To(Equal(7))
	})
})

// sixVersions writes, in a new namespace ns, six versions of web's
// resolved and BPM Secrets, each BPM naming its resolved version, and
// returns both series' keys.
func sixVersions(ns string) (versions.Key, versions.Key) {
	GinkgoHelper()
	Expect(cp.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	rkey := versions.Key{Namespace: ns, Deployment: "shop", Kind: names.KindResolved, InstanceGroup: "web"}
	bkey := rkey
	bkey.Kind = names.KindBPM
	for i := 1; i <= 6; i++ {
		r, err := versions.Write(ctx, cp.Client, versions.Desired{Key: rkey, Data: map[string][]byte{"k": []byte(fmt.Sprint(i))}})
		Expect(err).NotTo(HaveOccurred())
		_, err = versions.Write(ctx, cp.Client, versions.Desired{Key: bkey, Data: map[string][]byte{"k": []byte(fmt.Sprint(i))},
			Labels: map[string]string{names.LabelResolvedVersion: fmt.Sprint(r.Number)}})
		Expect(err).NotTo(HaveOccurred())
	}
	return rkey, bkey
}

var _ = Describe("pruning pinned versions", func() {
	It("keeps the resolved versions a StatefulSet template or a pod pins, and the BPM versions naming them", func() {
		ns := "versions-pinned"
		rkey, bkey := sixVersions(ns)
		labels := map[string]string{names.LabelDeployment: "shop", names.LabelInstanceGroup: "web"}
		pinned := func(v string) metav1.ObjectMeta {
			return metav1.ObjectMeta{Labels: labels, Annotations: map[string]string{names.AnnotationResolvedVersion: v}}
		}
		// A partitioned rollout's template names v1; a pod of another
		// revision, not yet running, names v2.
		Expect(cp.Client.Create(ctx, &appsv1.StatefulSet{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
			Spec: appsv1.StatefulSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: corev1.PodTemplateSpec{
				ObjectMeta: pinned("1"), Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x"}}}}},
		})).To(Succeed())
		pod := pinned("2")
		pod.Name, pod.Namespace = "web-1", ns
		Expect(cp.Client.Create(ctx, &corev1.Pod{ObjectMeta: pod, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x"}}}})).To(Succeed())

		stored, err := versions.ListDeployment(ctx, cp.Client, ns, "shop")
		Expect(err).NotTo(HaveOccurred())
		deleted, err := versions.Prune(ctx, cp.Client, ns, "shop", stored.Of(rkey), stored.Of(bkey))
		Expect(err).NotTo(HaveOccurred())
		Expect(deleted).To(ConsistOf("shop.ig-resolved.web-v3", "shop.bpm.web-v3"))
	})

	It("keeps the version an earlier template revision pins, so `kubectl rollout undo` to it still finds it", func() {
		ns := "versions-revisions"
		rkey, bkey := sixVersions(ns)
		// The runner rolled web from version 1 to 6: the StatefulSet
		// controller keeps the first template as an earlier revision.
		labels := map[string]string{names.LabelDeployment: "shop", names.LabelInstanceGroup: "web"}
		sts := &appsv1.StatefulSet{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
			Spec: appsv1.StatefulSetSpec{Replicas: new(int32), Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: map[string]string{names.AnnotationResolvedVersion: "1"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x"}}}}},
		}
		Expect(cp.Client.Create(ctx, sts)).To(Succeed())
		revisions := func() ([]appsv1.ControllerRevision, error) {
			var list appsv1.ControllerRevisionList
			err := cp.Client.List(ctx, &list, client.InNamespace(ns))
			return list.Items, err
		}
		Eventually(revisions).WithTimeout(20 * time.Second).Should(HaveLen(1))
		patch := client.MergeFrom(sts.DeepCopy())
		sts.Spec.Template.Annotations[names.AnnotationResolvedVersion] = "6"
		Expect(cp.Client.Patch(ctx, sts, patch)).To(Succeed())
		Eventually(revisions).WithTimeout(20 * time.Second).Should(HaveLen(2))

		stored, err := versions.ListDeployment(ctx, cp.Client, ns, "shop")
		Expect(err).NotTo(HaveOccurred())
		deleted, err := versions.Prune(ctx, cp.Client, ns, "shop", stored.Of(rkey), stored.Of(bkey))
		Expect(err).NotTo(HaveOccurred())
		Expect(deleted).To(ConsistOf("shop.ig-resolved.web-v2", "shop.ig-resolved.web-v3", "shop.bpm.web-v2", "shop.bpm.web-v3"))

		// The rollback restores the template naming version 1, which is
		// still there.
		kubeconfig, err := cp.KubeconfigFile("rollback")
		Expect(err).NotTo(HaveOccurred())
		out, err := exec.Command(filepath.Join(cp.BinDir, "kubectl"), "--kubeconfig", kubeconfig, "--namespace", ns,
			"rollout", "undo", "statefulset/web", "--to-revision=1").CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), string(out))
		Expect(cp.Client.Get(ctx, client.ObjectKeyFromObject(sts), sts)).To(Succeed())
		Expect(sts.Spec.Template.Annotations).To(HaveKeyWithValue(names.AnnotationResolvedVersion, "1"))
		for _, name := range []string{"shop.ig-resolved.web-v1", "shop.bpm.web-v1"} {
			Expect(cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &corev1.Secret{})).To(Succeed(), name)
		}
	})
})
