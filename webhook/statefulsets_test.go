package webhook_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bosh-injector/bosh-injector/gather/names"
)

// The apiserver sends the chart's webhook a deployment's StatefulSet
// update that changes its (immutable) volumeClaimTemplates.
var _ = Describe("a persistent disk size applied to a StatefulSet", func() {
	statefulSet := func(ns string, labels map[string]string) *appsv1.StatefulSet {
		return &appsv1.StatefulSet{
			ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: ns},
			Spec: appsv1.StatefulSetSpec{
				Replicas: ptr.To(int32(0)),
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "img"}}}},
				VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "store"},
					Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
						Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}},
			},
		}
	}
	newNamespace := func() string {
		GinkgoHelper()
		n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "disks-"}}
		Expect(cp.Client.Create(ctx, n)).To(Succeed())
		return n.Name
	}
	resize := func(s *appsv1.StatefulSet, size string) error {
		GinkgoHelper()
		// The StatefulSet controller writes its status meanwhile.
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			Expect(cp.Client.Get(ctx, client.ObjectKeyFromObject(s), s)).To(Succeed())
			s.Spec.VolumeClaimTemplates[0].Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse(size)
			return cp.Client.Update(ctx, s)
		})
	}

	It("is taken as the wanted size, the template kept; a smaller one is refused", func() {
		ns := newNamespace()
		s := statefulSet(ns, map[string]string{names.LabelDeployment: "d", names.LabelInstanceGroup: "db"})
		Expect(cp.Client.Create(ctx, s)).To(Succeed())
		Expect(resize(s, "2Gi")).To(Succeed())
		Expect(s.Annotations).To(HaveKeyWithValue(names.AnnotationDiskSizes, `{"store":"2Gi"}`))
		Expect(s.Spec.VolumeClaimTemplates[0].Spec.Resources.Requests.Storage().String()).To(Equal("1Gi"))
		Expect(resize(s, "512Mi")).To(MatchError(ContainSubstring("persistent disk 'store' of 2Gi cannot shrink to 512Mi")))
	})

	It("records a disk added for the disk controller, the templates kept, also across an update leaving it out", func() {
		ns := newNamespace()
		s := statefulSet(ns, map[string]string{names.LabelDeployment: "d", names.LabelInstanceGroup: "db"})
		Expect(cp.Client.Create(ctx, s)).To(Succeed())
		Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
			Expect(cp.Client.Get(ctx, client.ObjectKeyFromObject(s), s)).To(Succeed())
			index := *s.Spec.VolumeClaimTemplates[0].DeepCopy()
			index.Name = names.NamedDiskVolume("index")
			s.Spec.VolumeClaimTemplates = append(s.Spec.VolumeClaimTemplates, index)
			return cp.Client.Update(ctx, s)
		})).To(Succeed())
		Expect(s.Spec.VolumeClaimTemplates).To(HaveLen(1))
		Expect(s.Annotations).To(HaveKeyWithValue(names.AnnotationDiskTemplates, And(ContainSubstring(`"name":"store"`), ContainSubstring(`"name":"disk-index"`))))
		Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
			Expect(cp.Client.Get(ctx, client.ObjectKeyFromObject(s), s)).To(Succeed())
			s.Annotations = nil
			return cp.Client.Update(ctx, s)
		})).To(Succeed())
		Expect(s.Annotations).To(HaveKey(names.AnnotationDiskTemplates))
	})

	It("leaves other StatefulSets to the apiserver", func() {
		s := statefulSet(newNamespace(), map[string]string{"app": "db"})
		Expect(cp.Client.Create(ctx, s)).To(Succeed())
		Expect(resize(s, "2Gi")).To(MatchError(ContainSubstring("volumeClaimTemplates")))
	})
})

// A user's `kubectl apply` of fewer replicas is held for the deploy
// controller to pace; the operator's own updates pass as they are.
var _ = Describe("fewer replicas applied to a StatefulSet", func() {
	It("are kept and recorded for a user, taken from the operator, forgotten on more", func() {
		n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "scale-"}}
		Expect(cp.Client.Create(ctx, n)).To(Succeed())
		labels := map[string]string{names.LabelDeployment: "d", names.LabelInstanceGroup: "db"}
		s := &appsv1.StatefulSet{
			ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: n.Name},
			Spec: appsv1.StatefulSetSpec{
				Replicas: ptr.To(int32(6)),
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "img"}}}},
			},
		}
		Expect(cp.Client.Create(ctx, s)).To(Succeed())
		cfg := rest.CopyConfig(cp.Config)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: operatorUser, Groups: []string{"system:masters"}}
		operator, err := client.New(cfg, client.Options{})
		Expect(err).NotTo(HaveOccurred())
		scale := func(c client.Client, replicas int32) {
			GinkgoHelper()
			Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
				Expect(c.Get(ctx, client.ObjectKeyFromObject(s), s)).To(Succeed())
				s.Spec.Replicas = ptr.To(replicas)
				return c.Update(ctx, s)
			})).To(Succeed())
		}

		scale(cp.Client, 3)
		Expect(*s.Spec.Replicas).To(BeEquivalentTo(6))
		Expect(s.Annotations).To(HaveKeyWithValue(names.AnnotationScaleDown, "3"))

		scale(operator, 5)
		Expect(*s.Spec.Replicas).To(BeEquivalentTo(5))
		Expect(s.Annotations).To(HaveKeyWithValue(names.AnnotationScaleDown, "3"))

		// A label changes no replicas: the scale-down goes on.
		Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
			Expect(cp.Client.Get(ctx, client.ObjectKeyFromObject(s), s)).To(Succeed())
			s.Labels = map[string]string{"team": "a"}
			return cp.Client.Update(ctx, s)
		})).To(Succeed())
		Expect(s.Annotations).To(HaveKeyWithValue(names.AnnotationScaleDown, "3"))

		scale(cp.Client, 6)
		Expect(*s.Spec.Replicas).To(BeEquivalentTo(6))
		Expect(s.Annotations).NotTo(HaveKey(names.AnnotationScaleDown))
	})
})
