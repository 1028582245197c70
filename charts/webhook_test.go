package charts_test

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bosh-injector/bosh-injector/gather/gathering/trust"
	"github.com/bosh-injector/bosh-injector/gather/model/bpm"
	"github.com/bosh-injector/bosh-injector/gather/names"
	"github.com/bosh-injector/bosh-injector/gather/operator/manager"
	"github.com/bosh-injector/bosh-injector/test/fixtures"
	"github.com/bosh-injector/bosh-injector/test/walkthrough"
	"github.com/bosh-injector/bosh-injector/webhook"
)

// The chart's webhook configuration, selectors and policies included, with
// the certificate cert-manager issued for it, served by the operator's
// webhook running in this process: only the client config becomes a URL,
// since no Service here leads to this process.
var _ = Describe("the chart's webhook with cert-manager's certificate", func() {
	It("injects a labelled StatefulSet's pods", func() {
		const ns = "chart-webhook"
		l, err := net.Listen("tcp", "127.0.0.1:0")
		Expect(err).NotTo(HaveOccurred())
		port := l.Addr().(*net.TCPAddr).Port
		Expect(l.Close()).To(Succeed())
		url := "https://localhost:" + strconv.Itoa(port) + webhook.Path
		helm(append([]string{"install", "hooked", chartDir, "--namespace", ns, "--create-namespace", "--set", "certificate.extraDNSNames={localhost}",
			"--set", "test.webhookURL=" + url}, walkthrough.ChartImage()...)...)

		var serving corev1.Secret
		Eventually(func() error {
			return cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "hooked-bosh-injector-serving-cert"}, &serving)
		}).WithTimeout(30 * time.Second).Should(Succeed())
		certDir := GinkgoT().TempDir()
		for _, k := range []string{"tls.crt", "tls.key"} {
			Expect(os.WriteFile(filepath.Join(certDir, k), serving.Data[k], 0o600)).To(Succeed())
		}
		mgr, err := manager.New(cp.Config, manager.Options{Namespace: ns, OperatorImage: walkthrough.OperatorImage,
			ClusterDomain: "cluster.local", Host: "127.0.0.1", Port: port, CertDir: certDir, Webhook: true}, GinkgoLogr)
		Expect(err).NotTo(HaveOccurred())
		mctx, cancel := context.WithCancel(ctx)
		DeferCleanup(cancel)
		go func() {
			defer GinkgoRecover()
			Expect(mgr.Start(mctx)).To(Succeed())
		}()
		Eventually(func() error { return mgr.GetWebhookServer().StartedChecker()(&http.Request{}) }).Should(Succeed())

		var hook admissionregistrationv1.MutatingWebhookConfiguration
		Eventually(func() ([]byte, error) {
			err := cp.Client.Get(ctx, client.ObjectKey{Name: "hooked-bosh-injector"}, &hook)
			return hook.Webhooks[0].ClientConfig.CABundle, err
		}).WithTimeout(30 * time.Second).Should(Equal(serving.Data["ca.crt"]))
		hook.Webhooks[0].ClientConfig.Service = nil
		hook.Webhooks[0].ClientConfig.URL = ptr.To(url)
		Expect(cp.Client.Update(ctx, &hook)).To(Succeed())

		const app = "shop-app"
		Expect(cp.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: app}})).To(Succeed())
		info := bpm.Info{Deployment: "shop", InstanceGroup: "web", Instances: 2, Lifecycle: "service", ResolvedSecret: "shop.ig-resolved.web-v1",
			Releases: []bpm.Release{{Name: "shop", Version: "1", Image: "localhost/shop:1"}},
			Jobs:     []bpm.Job{{Name: "storefront", Release: "shop"}},
			BPM: []bpm.InstanceBPM{{Indexes: []int{0, 1}, Jobs: map[string]bpm.Config{
				"storefront": {Processes: []bpm.Process{{Name: "storefront", Executable: "/var/vcap/packages/storefront/bin/storefront"}}}}}}}
		Expect(fixtures.StoreInfo(ctx, cp.Client, ns, app, info)).To(Succeed())
		Expect(mgr.GetCache().WaitForCacheSync(ctx)).To(BeTrue())

		labels := map[string]string{names.LabelDeployment: "shop", names.LabelInstanceGroup: "web"}
		Expect(cp.Client.Create(ctx, &appsv1.StatefulSet{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: app},
			Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](2), PodManagementPolicy: appsv1.ParallelPodManagement,
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "placeholder", Image: "busybox"}}}}},
		})).To(Succeed())
		Eventually(func() ([]string, error) {
			var pods corev1.PodList
			err := cp.Client.List(ctx, &pods, client.InNamespace(app))
			var indexes []string
			for _, p := range pods.Items {
				if _, ok := p.Annotations[names.AnnotationInjected]; ok {
					indexes = append(indexes, p.Labels[names.LabelInstanceIndex])
				}
			}
			return indexes, err
		}).WithTimeout(30 * time.Second).Should(ConsistOf("0", "1"))

		// `helm test` runs on a real node in the end-to-end walkthrough
		// (test/e2e), where its pod reaches the webhook through the
		// chart's Service.
		Expect(trust.Read(ctx, cp.Client, ns, app, "shop")).NotTo(BeNil())
		helm("uninstall", "hooked", "--namespace", ns)
		// The operator's record of what it accepted goes with the chart.
		Eventually(func() (*trust.Record, error) { return trust.Read(ctx, cp.Client, ns, app, "shop") }).
			WithTimeout(30 * time.Second).Should(BeNil())
	})
})
