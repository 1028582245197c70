package webhook_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bosh-injector/bosh-injector/gather/gathering/trust"
	"github.com/bosh-injector/bosh-injector/gather/model/bpm"
	"github.com/bosh-injector/bosh-injector/gather/names"
	"github.com/bosh-injector/bosh-injector/inject"
	"github.com/bosh-injector/bosh-injector/test/fixtures"
)

// storeInfo stores info as a gathering would and accepts it as the runner
// does, and waits for the operator's cache to hold the record.
func storeInfo(ns string, info bpm.Info) {
	GinkgoHelper()
	Expect(fixtures.StoreInfo(ctx, cp.Client, operatorNamespace, ns, info)).To(Succeed())
	Eventually(func() (*trust.Record, error) {
		return trust.Read(ctx, operatorCache, operatorNamespace, ns, info.Deployment)
	}).Should(Not(BeNil()))
}

var webInfo = bpm.Info{
	Deployment: "shop", InstanceGroup: "web", Instances: 4, AZs: []string{"z1", "z2"}, Lifecycle: "service",
	ResolvedSecret: "shop.ig-resolved.web-v1",
	Releases:       []bpm.Release{{Name: "shop", Version: "1", Image: "localhost/shop:1"}},
	Jobs:           []bpm.Job{{Name: "storefront", Release: "shop"}},
	BPM: []bpm.InstanceBPM{{Indexes: []int{0, 1, 2, 3}, Jobs: map[string]bpm.Config{
		"storefront": {Processes: []bpm.Process{{Name: "storefront", Executable: "/var/vcap/packages/storefront/bin/storefront"}}},
	}}},
}

var errandInfo = bpm.Info{
	Deployment: "shop", InstanceGroup: "smoke-tests", Instances: 1, Lifecycle: "errand",
	ResolvedSecret: "shop.ig-resolved.smoke-tests-v1",
	Releases:       []bpm.Release{{Name: "shop", Version: "1", Image: "localhost/shop:1"}},
	Jobs:           []bpm.Job{{Name: "smoke-tests", Release: "shop", Scripts: []string{"run"}}},
	BPM:            []bpm.InstanceBPM{{Indexes: []int{0}, Jobs: map[string]bpm.Config{}}},
}

func template(labels map[string]string, restart corev1.RestartPolicy) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec:       corev1.PodSpec{RestartPolicy: restart, Containers: []corev1.Container{{Name: "placeholder", Image: "busybox"}}},
	}
}

func statefulSet(ns, name string, labels map[string]string, replicas int32) *appsv1.StatefulSet {
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To(replicas), PodManagementPolicy: appsv1.ParallelPodManagement,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: template(labels, corev1.RestartPolicyAlways),
		},
	}
}

func pods(ns string, labels client.MatchingLabels) func() ([]corev1.Pod, error) {
	return func() ([]corev1.Pod, error) {
		var list corev1.PodList
		err := cp.Client.List(ctx, &list, client.InNamespace(ns), labels)
		return list.Items, err
	}
}

var _ = Describe("the webhook on a real apiserver and controller manager", func() {
	var ns string
	var n int
	BeforeEach(func() {
		n++
		ns = fmt.Sprintf("webhook-%d", n)
		Expect(cp.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	})

	It("injects the pods of two AZ StatefulSets with indexes az-index × replicas + ordinal, holding those the deploy has not started", func() {
		storeInfo(ns, webInfo)
		// The deploy started web-z1's first instance, none of web-z2's.
		manifest := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "shop-manifest", Namespace: ns, Labels: map[string]string{names.LabelDeployment: "shop"},
			Annotations: map[string]string{names.AnnotationDeploy: `{"phase":"Deploying","instances":{"web-z1":1}}`}}, Data: map[string][]byte{names.ManifestKey: []byte("name: shop\n")}}
		Expect(cp.Client.Create(ctx, manifest)).To(Succeed())
		Eventually(func() error { return operatorCache.Get(ctx, client.ObjectKeyFromObject(manifest), &corev1.Secret{}) }).Should(Succeed())
		for az := 1; az <= 2; az++ {
			labels := map[string]string{names.LabelDeployment: "shop", names.LabelInstanceGroup: "web", names.LabelAZIndex: strconv.Itoa(az)}
			Expect(cp.Client.Create(ctx, statefulSet(ns, fmt.Sprintf("web-z%d", az), labels, 2))).To(Succeed())
		}
		Eventually(pods(ns, client.MatchingLabels{names.LabelInstanceGroup: "web"})).Should(HaveLen(4))
		list, _ := pods(ns, client.MatchingLabels{names.LabelInstanceGroup: "web"})()
		indexes := map[string]string{}
		gated := map[string]bool{}
		for _, p := range list {
			indexes[p.Name] = p.Labels[names.LabelInstanceIndex]
			gated[p.Name] = inject.Gated(&p)
			Expect(p.Annotations).To(HaveKey(names.AnnotationInjected))
			Expect(p.Spec.InitContainers).To(ContainElement(HaveField("Name", "render")))
			Expect(p.Spec.Containers).To(ContainElement(HaveField("Name", "storefront-storefront")))
		}
		Expect(indexes).To(Equal(map[string]string{"web-z1-0": "0", "web-z2-0": "1", "web-z1-1": "2", "web-z2-1": "3"}))
		Expect(gated).To(Equal(map[string]bool{"web-z1-0": false, "web-z1-1": true, "web-z2-0": true, "web-z2-1": true}))
	})

	It("leaves unlabelled pods and pods in the operator's namespace alone", func() {
		storeInfo(ns, webInfo)
		plain := map[string]string{"app": "plain"}
		Expect(cp.Client.Create(ctx, statefulSet(ns, "plain", plain, 1))).To(Succeed())
		Eventually(pods(ns, client.MatchingLabels(plain))).Should(ConsistOf(HaveField("ObjectMeta.Annotations", Not(HaveKey(names.AnnotationInjected)))))

		storeInfo(operatorNamespace, webInfo)
		labels := map[string]string{names.LabelDeployment: "shop", names.LabelInstanceGroup: "web"}
		Expect(cp.Client.Create(ctx, statefulSet(operatorNamespace, "own", labels, 1))).To(Succeed())
		Eventually(pods(operatorNamespace, client.MatchingLabels(labels))).Should(ConsistOf(
			HaveField("ObjectMeta.Annotations", Not(HaveKey(names.AnnotationInjected)))))
	})

	// failedCreates are the StatefulSet name's FailedCreate Events: the
	// webhook's denials as the user sees them.
	failedCreates := func(name string) func() ([]string, error) {
		return func() ([]string, error) {
			var events corev1.EventList
			err := cp.Client.List(ctx, &events, client.InNamespace(ns))
			var msgs []string
			for _, e := range events.Items {
				if e.InvolvedObject.Name == name && e.Reason == "FailedCreate" {
					msgs = append(msgs, e.Message)
				}
			}
			return msgs, err
		}
	}

	It("denies a pod of an ungathered deployment, with the reason in the StatefulSet's events", func() {
		labels := map[string]string{names.LabelDeployment: "nope", names.LabelInstanceGroup: "web"}
		Expect(cp.Client.Create(ctx, statefulSet(ns, "nope", labels, 1))).To(Succeed())
		Eventually(failedCreates("nope")).WithTimeout(20 * time.Second).Should(ContainElement(And(
			ContainSubstring(string(inject.ReasonNotGathered)),
			ContainSubstring("deployment 'nope' has not been gathered in namespace "+ns))))
		list, _ := pods(ns, client.MatchingLabels(labels))()
		Expect(list).To(BeEmpty())
	})

	It("denies a pod of a deployment whose first gathering has not succeeded as not gathered, not as an unknown group", func() {
		Expect(trust.RecordJob(ctx, cp.Client, operatorNamespace, ns, "first", "first-gather-0123456789", "uid-1")).To(Succeed())
		labels := map[string]string{names.LabelDeployment: "first", names.LabelInstanceGroup: "web"}
		Expect(cp.Client.Create(ctx, statefulSet(ns, "first", labels, 1))).To(Succeed())
		Eventually(failedCreates("first")).WithTimeout(20 * time.Second).Should(ContainElement(And(
			ContainSubstring(string(inject.ReasonNotGathered)),
			ContainSubstring("deployment 'first' has not been gathered in namespace "+ns+" yet: its gathering is running or failed"))))
	})

	It("injects a labelled Job's pod as an errand", func() {
		storeInfo(ns, errandInfo)
		labels := map[string]string{names.LabelDeployment: "shop", names.LabelInstanceGroup: "smoke-tests"}
		Expect(cp.Client.Create(ctx, &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Name: "smoke-tests", Namespace: ns},
			Spec:       batchv1.JobSpec{Template: template(labels, corev1.RestartPolicyNever)},
		})).To(Succeed())
		Eventually(pods(ns, client.MatchingLabels(labels))).Should(ConsistOf(
			HaveField("Spec.Containers", ContainElement(And(
				HaveField("Name", "smoke-tests-run"),
				HaveField("Command", []string{"/var/vcap/jobs/smoke-tests/bin/run"}))))))
	})

	It("keeps admitting after the serving certificate files are rotated, without a restart", func() {
		storeInfo(ns, webInfo)
		caPEM := rotateServingCert(cp.WebhookServerOptions().CertDir)
		var hook admissionregistrationv1.MutatingWebhookConfiguration
		Expect(cp.Client.Get(ctx, client.ObjectKey{Name: "bosh-injector"}, &hook)).To(Succeed())
		hook.Webhooks[0].ClientConfig.CABundle = caPEM
		Expect(cp.Client.Update(ctx, &hook)).To(Succeed())

		labels := map[string]string{names.LabelDeployment: "shop", names.LabelInstanceGroup: "web", names.LabelAZIndex: "1"}
		Expect(cp.Client.Create(ctx, statefulSet(ns, "rotated", labels, 1))).To(Succeed())
		Eventually(pods(ns, client.MatchingLabels(labels))).WithTimeout(20 * time.Second).Should(ConsistOf(
			HaveField("ObjectMeta.Annotations", HaveKey(names.AnnotationInjected))))
	})
})

// rotateServingCert writes a new serving certificate, from a new CA, into
// dir and returns the CA: only a server that reloaded its files is trusted
// afterwards.
func rotateServingCert(dir string) []byte {
	GinkgoHelper()
	ca, err := writeServingCert(dir)
	Expect(err).NotTo(HaveOccurred())
	return ca
}

// writeServingCert writes tls.crt and tls.key for localhost and 127.0.0.1,
// signed by a new CA, which it returns.
func writeServingCert(dir string) ([]byte, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test-ca"}, IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "webhook"},
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caTmpl, &key.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), nil
}
