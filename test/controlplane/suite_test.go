package controlplane_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/bosh-injector/bosh-injector/test/controlplane"
)

func TestControlPlane(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Control plane")
}

var (
	cp  *controlplane.ControlPlane
	ctx context.Context
)

var _ = BeforeSuite(func() {
	ctx = context.Background()
	cp = controlplane.StartForSuite(controlplane.Options{
		ControllerManager: true,
		CertManager:       true,
		Webhook:           envtest.WebhookInstallOptions{MutatingWebhooks: []*admissionregistrationv1.MutatingWebhookConfiguration{markerWebhook()}},
	})

	// A trivial mutating webhook, served from this process, reached by the
	// real apiserver over TLS.
	server := webhook.NewServer(cp.WebhookServerOptions())
	server.Register("/mark", &webhook.Admission{Handler: admission.HandlerFunc(mark)})
	serverCtx, cancel := context.WithCancel(ctx)
	DeferCleanup(cancel)
	go func() {
		defer GinkgoRecover()
		Expect(server.Start(serverCtx)).To(Succeed())
	}()
	Eventually(func() error { return server.StartedChecker()(&http.Request{}) }).Should(Succeed())
})

var _ = AfterEach(func() { cp.LogsOnFailure() })

// markerWebhook sends pods labelled mark=yes to /mark.
func markerWebhook() *admissionregistrationv1.MutatingWebhookConfiguration {
	return &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "marker"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name:                    "marker.bosh-injector.io",
			AdmissionReviewVersions: []string{"v1"},
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
			ObjectSelector:          &metav1.LabelSelector{MatchLabels: map[string]string{"mark": "yes"}},
			ClientConfig: admissionregistrationv1.WebhookClientConfig{
				Service: &admissionregistrationv1.ServiceReference{Name: "marker", Namespace: "default", Path: ptr.To("/mark")},
			},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
			}},
		}},
	}
}

// mark adds the annotation marked=true to the pod.
func mark(_ context.Context, req admission.Request) admission.Response {
	var pod corev1.Pod
	if err := json.Unmarshal(req.Object.Raw, &pod); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations["marked"] = "true"
	patched, err := json.Marshal(&pod)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	return admission.PatchResponseFromRaw(req.Object.Raw, patched)
}

func podTemplate(labels map[string]string, restart corev1.RestartPolicy) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec: corev1.PodSpec{
			RestartPolicy: restart,
			Containers:    []corev1.Container{{Name: "main", Image: "example.invalid/main:1"}},
		},
	}
}

func podsWith(labels map[string]string) func() ([]corev1.Pod, error) {
	return func() ([]corev1.Pod, error) {
		var pods corev1.PodList
		err := cp.Client.List(ctx, &pods, client.InNamespace("default"), client.MatchingLabels(labels))
		return pods.Items, err
	}
}

var _ = Describe("the real control plane", func() {
	It("runs the StatefulSet controller: 3 replicas give 3 pods", func() {
		labels := map[string]string{"app": "three"}
		sts := &appsv1.StatefulSet{
			ObjectMeta: metav1.ObjectMeta{Name: "three", Namespace: "default"},
			Spec: appsv1.StatefulSetSpec{
				Replicas:            ptr.To[int32](3),
				Selector:            &metav1.LabelSelector{MatchLabels: labels},
				Template:            podTemplate(labels, corev1.RestartPolicyAlways),
				PodManagementPolicy: appsv1.ParallelPodManagement,
			},
		}
		Expect(cp.Client.Create(ctx, sts)).To(Succeed())
		Eventually(podsWith(labels)).Should(HaveLen(3))
		pods, _ := podsWith(labels)()
		var names []string
		for _, p := range pods {
			names = append(names, p.Name)
		}
		Expect(names).To(ConsistOf("three-0", "three-1", "three-2"))
	})

	It("runs the Job controller: a Job gets its pod", func() {
		labels := map[string]string{"app": "errand"}
		job := &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Name: "errand", Namespace: "default"},
			Spec:       batchv1.JobSpec{Template: podTemplate(labels, corev1.RestartPolicyNever)},
		}
		Expect(cp.Client.Create(ctx, job)).To(Succeed())
		Eventually(podsWith(labels)).Should(HaveLen(1))
	})

	It("calls a registered mutating webhook for labelled pods only", func() {
		marked := map[string]string{"app": "marked", "mark": "yes"}
		plain := map[string]string{"app": "plain"}
		for name, labels := range map[string]map[string]string{"marked": marked, "plain": plain} {
			Expect(cp.Client.Create(ctx, &appsv1.StatefulSet{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
				Spec: appsv1.StatefulSetSpec{
					Replicas: ptr.To[int32](1),
					Selector: &metav1.LabelSelector{MatchLabels: labels},
					Template: podTemplate(labels, corev1.RestartPolicyAlways),
				},
			})).To(Succeed())
		}
		Eventually(podsWith(marked)).Should(ConsistOf(
			HaveField("ObjectMeta.Annotations", HaveKeyWithValue("marked", "true"))))
		Eventually(podsWith(plain)).Should(ConsistOf(
			HaveField("ObjectMeta.Annotations", Not(HaveKey("marked")))))
	})
})
