package controlplane_test

import (
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// The chain the chart uses: self-signed Issuer → CA Certificate → CA Issuer →
// serving Certificate, and cainjector copying the CA into a webhook
// configuration annotated with cert-manager.io/inject-ca-from.
const certChain = `
apiVersion: cert-manager.io/v1
kind: Issuer
metadata: {name: selfsigned, namespace: default}
spec: {selfSigned: {}}
---
apiVersion: cert-manager.io/v1
kind: Certificate
metadata: {name: ca, namespace: default}
spec:
  isCA: true
  commonName: test-ca
  secretName: test-ca
  issuerRef: {name: selfsigned}
---
apiVersion: cert-manager.io/v1
kind: Issuer
metadata: {name: ca, namespace: default}
spec: {ca: {secretName: test-ca}}
---
apiVersion: cert-manager.io/v1
kind: Certificate
metadata: {name: serving, namespace: default}
spec:
  secretName: serving
  dnsNames: [webhook.default.svc]
  issuerRef: {name: ca}
`

var _ = Describe("cert-manager built from its modules", func() {
	It("issues a CA-signed serving certificate and injects the CA into a webhook configuration", func() {
		for _, doc := range splitYAML(certChain) {
			obj := &unstructured.Unstructured{}
			Expect(yaml.Unmarshal([]byte(doc), &obj.Object)).To(Succeed())
			Expect(cp.Client.Create(ctx, obj)).To(Succeed())
		}
		var serving corev1.Secret
		Eventually(func() error {
			return cp.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "serving"}, &serving)
		}).WithTimeout(30 * time.Second).Should(Succeed())
		Expect(serving.Data).To(HaveKey("tls.crt"))
		Expect(serving.Data).To(HaveKey("ca.crt"))

		hook := markerWebhook()
		hook.Name = "injected"
		hook.Annotations = map[string]string{"cert-manager.io/inject-ca-from": "default/serving"}
		hook.Webhooks[0].ObjectSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"never": "matches"}}
		hook.Webhooks[0].FailurePolicy = ptr.To(admissionregistrationv1.Ignore)
		Expect(cp.Client.Create(ctx, hook)).To(Succeed())
		Eventually(func() ([]byte, error) {
			var got admissionregistrationv1.MutatingWebhookConfiguration
			err := cp.Client.Get(ctx, client.ObjectKey{Name: "injected"}, &got)
			return got.Webhooks[0].ClientConfig.CABundle, err
		}).WithTimeout(30 * time.Second).Should(Equal(serving.Data["ca.crt"]))
	})
})

func splitYAML(docs string) []string {
	var out []string
	for _, d := range strings.Split(docs, "\n---\n") {
		if strings.TrimSpace(d) != "" {
			out = append(out, d)
		}
	}
	return out
}
