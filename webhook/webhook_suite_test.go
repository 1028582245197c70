package webhook_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr/funcr"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/bosh-injector/bosh-injector/gather/operator/manager"
	"github.com/bosh-injector/bosh-injector/test/controlplane"
)

func TestWebhook(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Webhook")
}

const operatorNamespace = "bosh-injector"

// operatorUser is the operator's user name; the specs' own client is
// another user's (the apiserver's admin).
const operatorUser = "system:serviceaccount:" + operatorNamespace + ":bosh-injector"

var (
	cp  *controlplane.ControlPlane
	ctx = context.Background()
	// operatorCache is the operator's cache, which admissions read.
	operatorCache client.Reader
	// operatorLogs holds every line the operator logged, up to level 5
	// (client-go's request bodies, level 8, are not an operator's log).
	operatorLogs = &lines{}
)

// lines is a log sink's output, safe for concurrent writers.
type lines struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (l *lines) add(prefix, args string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintln(&l.buf, prefix, args)
	fmt.Fprintln(GinkgoWriter, prefix, args)
}

func (l *lines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// The webhook configuration is the one the chart templates; the apiserver
// reaches the operator's webhook server, running in this process, over TLS.
var _ = BeforeSuite(func() {
	cp = controlplane.StartForSuite(controlplane.Options{
		ControllerManager: true,
		Webhook:           envtest.WebhookInstallOptions{Paths: []string{"manifests/mutatingwebhookconfiguration.yaml"}},
	})
	Expect(cp.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: operatorNamespace}})).To(Succeed())
	serving := cp.WebhookServerOptions()
	mgr, err := manager.New(cp.Config, manager.Options{
		Namespace: operatorNamespace, OperatorImage: "localhost/bosh-injector:test", ClusterDomain: "cluster.local",
		Host: serving.Host, Port: serving.Port, CertDir: serving.CertDir, Webhook: true, User: operatorUser,
	}, funcr.New(operatorLogs.add, funcr.Options{Verbosity: 5}))
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
