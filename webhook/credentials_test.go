package webhook_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bosh-injector/bosh-injector/gather/bpm"
	"github.com/bosh-injector/bosh-injector/gather/names"
	"github.com/bosh-injector/bosh-injector/gather/secretdata"
)

// noLeak asserts that value appears in no Pod of ns as `kubectl get pods
// -o yaml` prints them, in no Event of ns, and in no line the operator
// logged.
func noLeak(ns, value string) {
	GinkgoHelper()
	Expect(value).NotTo(BeEmpty())
	kubeconfig, err := cp.KubeconfigFile("credentials")
	Expect(err).NotTo(HaveOccurred())
	kubectl := filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "kubectl")
	out, err := exec.Command(kubectl, "--kubeconfig", kubeconfig, "get", "pods", "--namespace", ns, "--output", "yaml").CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), string(out))
	Expect(string(out)).NotTo(ContainSubstring(value), "a Pod holds the value")

	var events corev1.EventList
	Expect(cp.Client.List(ctx, &events, client.InNamespace(ns))).To(Succeed())
	var newEvents eventsv1.EventList
	Expect(cp.Client.List(ctx, &newEvents, client.InNamespace(ns))).To(Succeed())
	all, err := json.Marshal([]any{events, newEvents})
	Expect(err).NotTo(HaveOccurred())
	Expect(string(all)).NotTo(ContainSubstring(value), "an Event holds the value")
	Expect(operatorLogs.String()).To(ContainSubstring(`webhook "level"=`), "the operator's log is captured")
	Expect(operatorLogs.String()).NotTo(ContainSubstring(value), "the operator logged the value")
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
