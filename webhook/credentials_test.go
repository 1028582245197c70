package webhook_test

import (
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/bosh-injector/bosh-injector/gather/gathering/secretdata"
	"github.com/bosh-injector/bosh-injector/gather/model/bpm"
	"github.com/bosh-injector/bosh-injector/gather/names"
)

// noLeak asserts that no value appears in a Pod or an Event of ns, nor in
// a line the operator logged, and that the operator recovered from no
// panic.
func noLeak(ns string, values ...string) {
	GinkgoHelper()
	Expect(operatorLogs.String()).To(ContainSubstring(`webhook "level"=`), "the operator's log is captured")
	cp.ExpectNothingLeaked(ns, operatorLogs.String(), values...)
	noPanic()
}

// noPanic asserts that controller-runtime recovered from no panic of the
// operator's webhook or reconcilers, by its own counts (a recovered panic
// answers the apiserver with an error and may leave no operator log line).
func noPanic() {
	GinkgoHelper()
	families, err := metrics.Registry.Gather()
	Expect(err).NotTo(HaveOccurred())
	for _, f := range families {
		if f.GetName() == "controller_runtime_webhook_panics_total" || f.GetName() == "controller_runtime_reconcile_panics_total" {
			for _, m := range f.GetMetric() {
				Expect(m.GetCounter().GetValue()).To(BeZero(), f.GetName())
			}
		}
	}
}

var _ = Describe("a credential rendered into bpm.yml", func() {
	It("reaches the process at run time, never the Pod object, an Event or a log line", func() {
		ns := "credentials"
		res, jobsDir := shopObjects(ns)

		// storefront's bpm.yml passes its generated session secret in env
		// and args, as releases pass passwords.
		bpmYML := filepath.Join(jobsDir, "shop", "storefront", "templates", "bpm.yml.erb")
		data, err := os.ReadFile(bpmYML)
		Expect(err).NotTo(HaveOccurred())
		withSecret := strings.Replace(string(data), "  env:\n", "  - --session-secret=<%= p(\"storefront.session_secret\") %>\n  env:\n    STOREFRONT_SESSION_SECRET: \"<%= p(\"storefront.session_secret\") %>\"\n", 1)
		Expect(withSecret).NotTo(Equal(string(data)))
		Expect(os.WriteFile(bpmYML, []byte(withSecret), 0o644)).To(Succeed())

		rec := gatherAccepted(ns, res, jobsDir)

		var generated corev1.Secret
		Expect(cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: names.VariableSecret("shop", "session_secret")}, &generated)).To(Succeed())
		secret := string(generated.Data["password"])
		// The rendered bpm.yml the launcher reads holds it.
		var stored corev1.Secret
		Expect(cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: rec.Groups["web"].Latest().BPM.Name}, &stored)).To(Succeed())
		var info bpm.Info
		Expect(secretdata.Decode(stored.Data[bpm.InfoKey], &info)).To(Succeed())
		process := info.ForIndex(0)["storefront"].Processes[0]
		Expect(process.Env).To(HaveKeyWithValue("STOREFRONT_SESSION_SECRET", secret))
		Expect(process.Args).To(ContainElement("--session-secret=" + secret))

		for _, o := range res.Objects[1:] {
			Expect(cp.Client.Create(ctx, o)).To(Succeed(), o.GetName())
		}
		Eventually(pods(ns, client.MatchingLabels{names.LabelInstanceGroup: "web"})).WithTimeout(time.Minute).Should(HaveLen(2))
		list, _ := pods(ns, client.MatchingLabels{names.LabelInstanceGroup: "web"})()
		for _, p := range list {
			Expect(p.Annotations).To(HaveKey(names.AnnotationInjected))
		}
		noLeak(ns, secret)
	})
})
