package webhook_test

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bosh-injector/bosh-injector/gather/gathering/kubevars"
	"github.com/bosh-injector/bosh-injector/gather/gathering/secretdata"
	"github.com/bosh-injector/bosh-injector/gather/gathering/trust"
	"github.com/bosh-injector/bosh-injector/gather/model/bpm"
	"github.com/bosh-injector/bosh-injector/gather/model/manifest"
	"github.com/bosh-injector/bosh-injector/gather/model/variables"
	"github.com/bosh-injector/bosh-injector/gather/names"
	"github.com/bosh-injector/bosh-injector/inject"
	"github.com/bosh-injector/bosh-injector/webhook"
)

// failedCreates are the messages of a workload's FailedCreate Events: the
// webhook's denials as the StatefulSet or Job controller reports them.
func failedCreates(ns, workload string) func() ([]string, error) {
	return func() ([]string, error) {
		var events corev1.EventList
		err := cp.Client.List(ctx, &events, client.InNamespace(ns))
		var msgs []string
		for _, e := range events.Items {
			if e.InvolvedObject.Name == workload && e.Reason == "FailedCreate" {
				msgs = append(msgs, e.Message)
			}
		}
		return msgs, err
	}
}

// forgedSecret is a bpm Secret anyone who may create Secrets in ns can
// write: the labels of the group's versions, a high version, and a
// privileged process in an image of the forger's choice.
func forgedSecret(ns string, version int) *corev1.Secret {
	GinkgoHelper()
	info := webInfo
	info.Releases = []bpm.Release{{Name: "shop", Version: "1", Image: "evil.example/pwn:1"}}
	info.BPM = []bpm.InstanceBPM{{Indexes: []int{0, 1, 2, 3}, Jobs: map[string]bpm.Config{
		"storefront": {Processes: []bpm.Process{{Name: "storefront", Executable: "/bin/sh", Unsafe: &bpm.Unsafe{Privileged: true}}}},
	}}}
	data, err := secretdata.Encode(info)
	Expect(err).NotTo(HaveOccurred())
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: names.VersionedSecret("shop", names.KindBPM, "web", version), Labels: map[string]string{
			names.LabelDeployment: "shop", names.LabelInstanceGroup: "web", names.LabelSecretKind: names.KindBPM, names.LabelVersion: fmt.Sprint(version),
		}, Annotations: map[string]string{names.AnnotationInstanceGroupName: "web"}},
		Data: map[string][]byte{bpm.InfoKey: data},
	}
}

// untouched asserts that no container of the pods runs the forger's image
// or privileged.
func untouched(list []corev1.Pod) {
	GinkgoHelper()
	for _, p := range list {
		for _, c := range append(p.Spec.InitContainers, p.Spec.Containers...) {
			Expect(c.Image).NotTo(ContainSubstring("evil"), p.Name)
			if c.SecurityContext != nil {
				Expect(ptr.Deref(c.SecurityContext.Privileged, false)).To(BeFalse(), p.Name+"/"+c.Name)
			}
		}
	}
}

// withCredential is info with a credential in its process's env and args,
// as releases pass passwords: a password the gathering's generator made
// for deployment shop in ns, stored in its variable Secret. It returns the
// value too: no fault may carry it into a Pod, an Event or a log line.
func withCredential(ns string, info bpm.Info) (bpm.Info, string) {
	GinkgoHelper()
	Expect(variables.Generate([]manifest.Variable{{Name: "session_secret", Type: "password"}}, kubevars.New(ctx, cp.Client, ns, "shop"), time.Now())).To(Succeed())
	var generated corev1.Secret
	Expect(cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: names.VariableSecret("shop", "session_secret")}, &generated)).To(Succeed())
	value := string(generated.Data["password"])
	Expect(generated.Labels).To(HaveKeyWithValue(names.LabelManagedBy, names.ManagedBy))
	info.BPM = []bpm.InstanceBPM{{Indexes: []int{0, 1, 2, 3}, Jobs: map[string]bpm.Config{
		"storefront": {Processes: []bpm.Process{{Name: "storefront", Executable: "/var/vcap/packages/storefront/bin/storefront",
			Args: []string{"--session-secret=" + value}, Env: map[string]string{"STOREFRONT_SESSION_SECRET": value}}}},
	}}}
	return info, value
}

var _ = Describe("the webhook's fault table", func() {
	var ns string
	var n int
	labels := map[string]string{names.LabelDeployment: "shop", names.LabelInstanceGroup: "web", names.LabelAZIndex: "1"}
	BeforeEach(func() {
		n++
		ns = fmt.Sprintf("faults-%d", n)
		Expect(cp.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	})

	It("ignores a forged bpm Secret (version 999) with a warning Event on it; the pods get the gathered version", func() {
		info, secret := withCredential(ns, webInfo)
		storeInfo(ns, info)
		forged := forgedSecret(ns, 999)
		Expect(cp.Client.Create(ctx, forged)).To(Succeed())
		Eventually(func() error {
			return operatorCache.Get(ctx, client.ObjectKeyFromObject(forged), &corev1.Secret{})
		}).Should(Succeed())

		Expect(cp.Client.Create(ctx, statefulSet(ns, "web", labels, 2))).To(Succeed())
		Eventually(pods(ns, client.MatchingLabels(labels))).WithTimeout(20 * time.Second).Should(HaveLen(2))
		list, _ := pods(ns, client.MatchingLabels(labels))()
		untouched(list)
		for _, p := range list {
			Expect(p.Spec.Containers).To(ContainElement(And(HaveField("Name", "storefront-storefront"), HaveField("Image", "localhost/shop:1"))))
		}
		Eventually(func() ([]string, error) {
			var events eventsv1.EventList
			err := cp.Client.List(ctx, &events, client.InNamespace(ns))
			var notes []string
			for _, e := range events.Items {
				if e.Regarding.Name == forged.Name && e.Type == corev1.EventTypeWarning {
					notes = append(notes, e.Reason+": "+e.Note)
				}
			}
			return notes, err
		}).Should(ContainElement(And(
			HavePrefix(inject.ReasonUntrustedSecret.Code()+": "),
			ContainSubstring("no gathering of the deployment wrote it; it is ignored"))))
		noLeak(ns, secret)
	})

	It("denies a pod whose accepted bpm Secret was replaced by other content, naming the Secret", func() {
		info, secret := withCredential(ns, webInfo)
		storeInfo(ns, info)
		name := names.VersionedSecret("shop", names.KindBPM, "web", 1)
		Expect(cp.Client.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})).To(Succeed())
		Expect(cp.Client.Create(ctx, forgedSecret(ns, 1))).To(Succeed())

		Expect(cp.Client.Create(ctx, statefulSet(ns, "web", labels, 1))).To(Succeed())
		Eventually(failedCreates(ns, "web")).WithTimeout(20 * time.Second).Should(ContainElement(And(
			ContainSubstring(string(inject.ReasonUntrustedSecret)),
			ContainSubstring("Secret "+name+" of instance group 'web' of deployment 'shop' is not the one its gathering wrote"))))
		Consistently(pods(ns, client.MatchingLabels(labels))).WithTimeout(2 * time.Second).Should(BeEmpty())
		noLeak(ns, secret)
	})

	It("denies a new pod of a group whose resolved Secret was deleted while pods use it; the running pod keeps its version", func() {
		info, secret := withCredential(ns, webInfo)
		storeInfo(ns, info)
		Expect(cp.Client.Create(ctx, statefulSet(ns, "web", labels, 1))).To(Succeed())
		Eventually(pods(ns, client.MatchingLabels(labels))).WithTimeout(20 * time.Second).Should(HaveLen(1))

		Expect(cp.Client.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: webInfo.ResolvedSecret}})).To(Succeed())
		Eventually(func() error {
			return operatorCache.Get(ctx, client.ObjectKey{Namespace: ns, Name: webInfo.ResolvedSecret}, &corev1.Secret{})
		}).ShouldNot(Succeed())
		var sts = statefulSet(ns, "web", labels, 2)
		Expect(cp.Client.Patch(ctx, sts, client.MergeFrom(statefulSet(ns, "web", labels, 1)))).To(Succeed())
		Eventually(failedCreates(ns, "web")).WithTimeout(20 * time.Second).Should(ContainElement(And(
			ContainSubstring(string(inject.ReasonVersionGone)),
			ContainSubstring("Secret "+webInfo.ResolvedSecret+", version 1 of instance group 'web' of deployment 'shop', was deleted"))))
		list, _ := pods(ns, client.MatchingLabels(labels))()
		Expect(list).To(ConsistOf(HaveField("Spec.Volumes", ContainElement(HaveField("VolumeSource.Secret.SecretName", webInfo.ResolvedSecret)))))
		noLeak(ns, secret)
	})

	It("denies a pod with the group label but no deployment label, saying so", func() {
		info, secret := withCredential(ns, webInfo)
		storeInfo(ns, info)
		Expect(cp.Client.Create(ctx, statefulSet(ns, "nameless", map[string]string{names.LabelInstanceGroup: "web"}, 1))).To(Succeed())
		Eventually(failedCreates(ns, "nameless")).WithTimeout(20 * time.Second).Should(ContainElement(And(
			ContainSubstring(string(inject.ReasonNoDeployment)),
			ContainSubstring("but no label "+names.LabelDeployment))))
		noLeak(ns, secret)
	})

	It("injects a pod of an older template revision, recreated after a newer gathering, with its pinned version", func() {
		info, secret := withCredential(ns, webInfo)
		storeInfo(ns, info)
		newer := info
		newer.ResolvedSecret = "shop.ig-resolved.web-v2"
		newer.Releases = []bpm.Release{{Name: "shop", Version: "2", Image: "localhost/shop:2"}}
		storeInfo(ns, newer)
		Eventually(func() (int, error) {
			rec, err := trust.Read(ctx, operatorCache, operatorNamespace, ns, "shop")
			if rec == nil {
				return 0, err
			}
			return len(rec.Groups["web"].Versions), err
		}).Should(Equal(2))

		old := statefulSet(ns, "old", labels, 1)
		old.Spec.Template.Annotations = map[string]string{names.AnnotationResolvedVersion: "1"}
		Expect(cp.Client.Create(ctx, old)).To(Succeed())
		latest := map[string]string{names.LabelDeployment: "shop", names.LabelInstanceGroup: "web", names.LabelAZIndex: "2"}
		Expect(cp.Client.Create(ctx, statefulSet(ns, "latest", latest, 1))).To(Succeed())
		image := func(p corev1.Pod) string {
			for _, c := range p.Spec.Containers {
				if c.Name == "storefront-storefront" {
					return c.Image
				}
			}
			return ""
		}
		Eventually(pods(ns, client.MatchingLabels(labels))).WithTimeout(20 * time.Second).Should(ConsistOf(And(
			WithTransform(image, Equal("localhost/shop:1")),
			HaveField("Spec.Volumes", ContainElement(HaveField("VolumeSource.Secret.SecretName", "shop.ig-resolved.web-v1"))))))
		Eventually(pods(ns, client.MatchingLabels(latest))).WithTimeout(20 * time.Second).Should(ConsistOf(And(
			WithTransform(image, Equal("localhost/shop:2")),
			HaveField("Spec.Volumes", ContainElement(HaveField("VolumeSource.Secret.SecretName", "shop.ig-resolved.web-v2"))))))

		// A version nobody accepted is a denial naming the accepted ones.
		unknown := statefulSet(ns, "unknown", map[string]string{names.LabelDeployment: "shop", names.LabelInstanceGroup: "web", "v": "9"}, 1)
		unknown.Spec.Template.Annotations = map[string]string{names.AnnotationResolvedVersion: "9"}
		Expect(cp.Client.Create(ctx, unknown)).To(Succeed())
		Eventually(failedCreates(ns, "unknown")).WithTimeout(20 * time.Second).Should(ContainElement(And(
			ContainSubstring(string(inject.ReasonPinnedUnknown)),
			ContainSubstring("are [1 2]"))))
		noLeak(ns, secret)
	})
})

// review sends an AdmissionReview for object to the operator's webhook
// server over TLS, as the apiserver would, trusting the CA the webhook
// configuration holds now, and returns the response.
func review(kind metav1.GroupVersionKind, object []byte) *admissionv1.AdmissionResponse {
	GinkgoHelper()
	var hook admissionregistrationv1.MutatingWebhookConfiguration
	Expect(cp.Client.Get(ctx, client.ObjectKey{Name: "bosh-injector"}, &hook)).To(Succeed())
	pool := x509.NewCertPool()
	Expect(pool.AppendCertsFromPEM(hook.Webhooks[0].ClientConfig.CABundle)).To(BeTrue())
	body, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{UID: "fault", Kind: kind, Resource: metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
			Namespace: "faults-requests", Operation: admissionv1.Create},
	})
	Expect(err).NotTo(HaveOccurred())
	// The object as it is, valid JSON or not.
	if object != nil {
		body = bytes.Replace(body, []byte(`"object":null`), append([]byte(`"object":`), object...), 1)
	}
	w := cp.WebhookServerOptions()
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	resp, err := hc.Post(fmt.Sprintf("https://%s%s", net.JoinHostPort(w.Host, strconv.Itoa(w.Port)), webhook.Path), "application/json", bytes.NewReader(body))
	Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	Expect(resp.StatusCode).To(Equal(http.StatusOK))
	var answer admissionv1.AdmissionReview
	Expect(json.NewDecoder(resp.Body).Decode(&answer)).To(Succeed())
	Expect(answer.Response).NotTo(BeNil())
	return answer.Response
}

var _ = Describe("malformed admission requests, sent to the webhook server as the apiserver would", func() {
	podKind := metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}
	labelled := `"metadata":{"name":"web-0","labels":{"bosh-injector.io/deployment":"shop","bosh-injector.io/instance-group":"web"}}`
	DescribeTable("are denied with a clear reason, never patched",
		func(kind metav1.GroupVersionKind, object string, reason inject.Reason, message string) {
			var raw []byte
			if object != "" {
				raw = []byte(object)
			}
			r := review(kind, raw)
			Expect(r.Allowed).To(BeFalse())
			Expect(r.Patch).To(BeEmpty())
			Expect(r.Result).NotTo(BeNil())
			Expect(r.Result.Message).To(And(HavePrefix(string(reason)+": "), ContainSubstring(message)))
			noPanic()
		},
		Entry("a pod of the wrong shape", podKind, `{"metadata":{"labels":"web"},"spec":{"containers":[{"name":"c"}]}}`, inject.ReasonInvalidPod, "cannot unmarshal string"),
		Entry("duplicate keys", podKind, `{`+labelled+`,"spec":{"containers":[{"name":"c"}],"containers":[]}}`, inject.ReasonInvalidPod, `duplicate field "spec.containers"`),
		Entry("a ConfigMap", metav1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, `{"metadata":{"name":"c"}}`, inject.ReasonNotAPod, "the request is for a /v1, Kind=ConfigMap"),
		Entry("an object whose kind is not Pod", podKind, `{"apiVersion":"v1","kind":"Secret",`+labelled+`}`, inject.ReasonNotAPod, "the object is a v1 Secret"),
		Entry("no object", podKind, ``, inject.ReasonNoPodSpec, "the request has no object"),
		Entry("an empty object", podKind, `{}`, inject.ReasonNoPodSpec, "the pod has no spec with containers"),
		Entry("a labelled pod without a spec", podKind, `{`+labelled+`}`, inject.ReasonNoPodSpec, "the pod has no spec with containers"),
		Entry("the group label without the deployment label", podKind,
			`{"metadata":{"name":"web-0","labels":{"bosh-injector.io/instance-group":"web"}},"spec":{"containers":[{"name":"c","image":"x"}]}}`,
			inject.ReasonNoDeployment, "pod has label bosh-injector.io/instance-group=web but no label bosh-injector.io/deployment"),
	)

	It("answers a truncated review with an error, without a patch", func() {
		r := review(podKind, []byte(`{"metadata":{"labels":`))
		Expect(r.Allowed).To(BeFalse())
		Expect(r.Patch).To(BeEmpty())
		Expect(r.Result.Code).To(BeEquivalentTo(http.StatusBadRequest))
		noPanic()
	})
})
