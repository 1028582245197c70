package charts_test

import (
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const (
	chartDir  = "bosh-injector"
	namespace = "bosh-system"
)

var _ = Describe("the bosh-injector chart", func() {
	It("renders as the golden file", func() {
		got := helm("template", "bosh-injector", chartDir, "--namespace", namespace)
		golden := filepath.Join("testdata", "bosh-injector.golden.yaml")
		if *update {
			Expect(os.WriteFile(golden, []byte(got), 0o644)).To(Succeed())
		}
		want, err := os.ReadFile(golden)
		Expect(err).NotTo(HaveOccurred(), "run go test ./charts -update to create it")
		Expect(got).To(Equal(string(want)), "run go test ./charts -update and review the diff")
	})

	It("is clean under helm lint --strict", func() {
		Expect(helm("lint", "--strict", chartDir)).To(ContainSubstring("0 chart(s) failed"))
	})

	It("rejects values outside its schema", func() {
		cmdErr := func(args ...string) error {
			_, err := helmErr(args...)
			return err
		}
		Expect(cmdErr("template", "x", chartDir, "--set", "webhook.failurePolicy=Sometimes")).To(MatchError(ContainSubstring("failurePolicy")))
		Expect(cmdErr("template", "x", chartDir, "--set", "replicaCount=0")).To(MatchError(ContainSubstring("replicaCount")))
	})

	It("installs: cert-manager issues the serving certificate and cainjector fills the webhook's caBundle", func() {
		helm("install", "bosh-injector", chartDir, "--namespace", namespace, "--create-namespace")

		var deploy appsv1.Deployment
		Expect(cp.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "bosh-injector"}, &deploy)).To(Succeed())
		Expect(*deploy.Spec.Replicas).To(BeEquivalentTo(2))

		var serving corev1.Secret
		Eventually(func() error {
			return cp.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "bosh-injector-serving-cert"}, &serving)
		}).WithTimeout(30 * time.Second).Should(Succeed())
		Expect(serving.Data).To(HaveKey("ca.crt"))

		Eventually(func() ([]byte, error) {
			var hook admissionregistrationv1.MutatingWebhookConfiguration
			err := cp.Client.Get(ctx, client.ObjectKey{Name: "bosh-injector"}, &hook)
			if err != nil {
				return nil, err
			}
			return hook.Webhooks[0].ClientConfig.CABundle, nil
		}).WithTimeout(30 * time.Second).Should(Equal(serving.Data["ca.crt"]))

		helm("upgrade", "bosh-injector", chartDir, "--namespace", namespace, "--set", "replicaCount=1")
		Expect(cp.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "bosh-injector"}, &deploy)).To(Succeed())
		Expect(*deploy.Spec.Replicas).To(BeEquivalentTo(1))

		helm("uninstall", "bosh-injector", "--namespace", namespace)
	})
})
