package webhook_test

import (
	"encoding/json"
	"os"
	"slices"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/yaml"

	"github.com/bosh-injector/bosh-injector/gather/gathering/trust"
	"github.com/bosh-injector/bosh-injector/gather/model/bpm"
	"github.com/bosh-injector/bosh-injector/inject"
	"github.com/bosh-injector/bosh-injector/inject/runtime/contract"
	"github.com/bosh-injector/bosh-injector/test/fixtures"
	"github.com/bosh-injector/bosh-injector/webhook"
)

// singleJob is the single-job golden case, its BPM info stored and
// accepted in a new namespace ns.
func singleJob(ns string) (c struct {
	Info bpm.Info   `json:"info"`
	Pod  corev1.Pod `json:"pod"`
}) {
	GinkgoHelper()
	data, err := os.ReadFile("../inject/testdata/single-job.yaml")
	Expect(err).NotTo(HaveOccurred())
	Expect(yaml.Unmarshal(data, &c)).To(Succeed())
	Expect(cp.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	storeInfo(ns, c.Info)
	return c
}

var _ = Describe("the admission handler", func() {
	It("returns a JSON patch that turns the request's pod into the golden pod", func() {
		ns := "handler-golden"
		c := singleJob(ns)

		raw, err := json.Marshal(c.Pod)
		Expect(err).NotTo(HaveOccurred())
		h := &webhook.Handler{Cache: cp.Client, Settings: inject.Settings{OperatorImage: "localhost/bosh-injector:dev", DNS: inject.DNS{Server: "10.96.0.53", ClusterDomain: "cluster.local"}}, OperatorNamespace: operatorNamespace, Log: GinkgoLogr}
		resp := h.Handle(ctx, admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
			Namespace: ns, Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: raw},
		}})
		Expect(resp.Allowed).To(BeTrue(), resp.Result.String())
		// The patch replaces the fields injection changes, not the pod.
		Expect(resp.PatchType).To(HaveValue(Equal(admissionv1.PatchTypeJSONPatch)))
		var ops []struct{ Op, Path string }
		Expect(json.Unmarshal(resp.Patch, &ops)).To(Succeed())
		var paths []string
		for _, op := range ops {
			Expect(op.Op).To(Equal("add"))
			paths = append(paths, op.Path)
		}
		Expect(paths).To(ContainElements("/metadata/labels", "/metadata/annotations", "/spec/volumes", "/spec/initContainers", "/spec/containers"))
		Expect(paths).To(HaveEach(MatchRegexp(`^/(metadata|spec)/[a-zA-Z]+$`)))
		pod, _, err := fixtures.Patched(raw, resp.Patch)
		Expect(err).NotTo(HaveOccurred())
		// The render container checks the resolved Secret against the
		// digest the operator recorded; the golden case has none.
		rec, err := trust.Read(ctx, cp.Client, operatorNamespace, ns, c.Info.Deployment)
		Expect(err).NotTo(HaveOccurred())
		render := &pod.Spec.InitContainers[slices.IndexFunc(pod.Spec.InitContainers, func(c corev1.Container) bool { return c.Name == "render" })]
		digest := &render.Env[slices.IndexFunc(render.Env, func(e corev1.EnvVar) bool { return e.Name == contract.EnvResolvedDigest })]
		Expect(digest.Value).To(Equal(rec.Groups["web"].Latest().Resolved.SHA256))
		digest.Value = ""
		got, err := yaml.Marshal(&pod)
		Expect(err).NotTo(HaveOccurred())
		want, err := os.ReadFile("../inject/testdata/single-job.golden.yaml")
		Expect(err).NotTo(HaveOccurred())
		Expect(string(got)).To(Equal(string(want)))
	})

	It("reads the DNS Service's cluster IP at every admission, so a Service created again is followed", func() {
		ns := "handler-dns"
		c := singleJob(ns)
		raw, err := json.Marshal(c.Pod)
		Expect(err).NotTo(HaveOccurred())
		// The operator's cache, as CacheOptions configures it, follows the
		// Service.
		h := &webhook.Handler{Cache: operatorCache, DNSService: "dns", Settings: inject.Settings{OperatorImage: "localhost/bosh-injector:dev", DNS: inject.DNS{ClusterDomain: "cluster.local"}},
			OperatorNamespace: operatorNamespace, Log: GinkgoLogr}
		admit := func() admission.Response {
			return h.Handle(ctx, admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
				Namespace: ns, Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: raw},
			}})
		}
		// nameservers are those of the admitted pod, none when denied.
		nameservers := func() []string {
			resp := admit()
			if !resp.Allowed {
				return nil
			}
			pod, _, err := fixtures.Patched(raw, resp.Patch)
			Expect(err).NotTo(HaveOccurred())
			Expect(pod.Spec.DNSConfig).NotTo(BeNil())
			return pod.Spec.DNSConfig.Nameservers
		}
		service := func(ip string) *corev1.Service {
			GinkgoHelper()
			svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "dns", Namespace: operatorNamespace},
				Spec: corev1.ServiceSpec{ClusterIP: ip, Ports: []corev1.ServicePort{{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP}}}}
			Expect(cp.Client.Create(ctx, svc)).To(Succeed())
			return svc
		}

		Eventually(func() string { return admit().Result.Message }).Should(ContainSubstring("reading the DNS Service " + operatorNamespace + "/dns"))

		svc := service("10.0.0.53")
		Eventually(nameservers).Should(Equal([]string{"10.0.0.53"}))
		Expect(cp.Client.Delete(ctx, svc)).To(Succeed())
		svc = service("10.0.0.54")
		Eventually(nameservers).Should(Equal([]string{"10.0.0.54"}))
		Expect(cp.Client.Delete(ctx, svc)).To(Succeed())
	})
})
