package webhook_test

import (
	"context"
	"net/http"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/bosh-injector/bosh-injector/test/controlplane"
	"github.com/bosh-injector/bosh-injector/webhook"
)

func TestWebhook(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Webhook")
}

const operatorNamespace = "bosh-injector"

var (
	cp  *controlplane.ControlPlane
	ctx = context.Background()
	// operatorCache is the operator's cache, which admissions read.
	operatorCache client.Reader
)

// The webhook configuration is the one the chart templates; the apiserver
// reaches the operator's webhook server, running in this process, over TLS.
var _ = BeforeSuite(func() {
	cp = controlplane.StartForSuite(controlplane.Options{
		ControllerManager: true,
		Webhook:           envtest.WebhookInstallOptions{Paths: []string{"manifests/mutatingwebhookconfiguration.yaml"}},
	})
	Expect(cp.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: operatorNamespace}})).To(Succeed())
	serving := cp.WebhookServerOptions()
	mgr, err := webhook.NewManager(cp.Config, webhook.Options{
		Namespace: operatorNamespace, OperatorImage: "localhost/bosh-injector:test", ClusterDomain: "cluster.local",
		Host: serving.Host, Port: serving.Port, CertDir: serving.CertDir, Webhook: true,
	}, GinkgoLogr)
	Expect(err).NotTo(HaveOccurred())
	mgrCtx, cancel := context.WithCancel(ctx)
	DeferCleanup(cancel)
	go func() {
		defer GinkgoRecover()
		Expect(mgr.Start(mgrCtx)).To(Succeed())
	}()
	Eventually(func() error { return mgr.GetWebhookServer().StartedChecker()(&http.Request{}) }).Should(Succeed())
	Expect(mgr.GetCache().WaitForCacheSync(ctx)).To(BeTrue())
	operatorCache = mgr.GetCache()
})

var _ = AfterEach(func() { cp.LogsOnFailure() })
