package charts_test

import (
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// objectsOf maps helm's output by kind/name, or kind/namespace/name.
func objectsOf(out string, namespaced bool) map[string]map[string]any {
	GinkgoHelper()
	objects := map[string]map[string]any{}
	for _, doc := range strings.Split(out, "\n---\n") {
		var o map[string]any
		Expect(yaml.Unmarshal([]byte(doc), &o)).To(Succeed())
		if o == nil {
			continue
		}
		meta := o["metadata"].(map[string]any)
		key := o["kind"].(string) + "/" + meta["name"].(string)
		if namespaced {
			ns, _ := meta["namespace"].(string)
			key = o["kind"].(string) + "/" + ns + "/" + meta["name"].(string)
		}
		objects[key] = o
	}
	return objects
}

func mustYAML(o any) string {
	GinkgoHelper()
	b, err := yaml.Marshal(o)
	Expect(err).NotTo(HaveOccurred())
	return string(b)
}

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
		Expect(cmdErr("template", "x", chartDir, "--set", "logFormat=xml")).To(MatchError(ContainSubstring("logFormat")))
		Expect(cmdErr("template", "x", chartDir, "--set", "serviceAccount.create=false")).To(MatchError(ContainSubstring("serviceAccount.name is required")))
		Expect(cmdErr("template", "x", chartDir, "--set", "configServer.mode=foo")).To(MatchError(ContainSubstring("/configServer/mode")))
		Expect(cmdErr("template", "x", chartDir, "--set", "configServer.mode=external")).To(MatchError(ContainSubstring("/configServer/external/url")))
		Expect(cmdErr("template", "x", chartDir, "--set", "configServer.embedded.clients[0].name=director")).To(MatchError(ContainSubstring("missing property 'secretName'")))
		Expect(cmdErr("template", "x", chartDir, "--set", "configServer.embedded.replica=3")).To(MatchError(ContainSubstring("'replica' not allowed")))
		Expect(cmdErr("template", "x", chartDir, "--set", "configServer.namespaceDirectorNames.cf=my/bosh")).To(MatchError(ContainSubstring("/configServer/namespaceDirectorNames/cf")))
		Expect(cmdErr("template", "x", chartDir, "--set", "configServer.namespaceDirectorNames.CF=my-bosh")).To(MatchError(ContainSubstring("invalid propertyName 'CF'")))
	})

	It("renders the operator's pod conventions from values", func() {
		out := helm("template", "bosh-injector", chartDir, "--namespace", namespace,
			"--set", "serviceAccount.create=false", "--set", "serviceAccount.name=ops",
			"--set", "priorityClassName=system-cluster-critical",
			"--set", "extraArgs={--leader-elect-extra}", "--set", "extraEnv[0].name=HTTPS_PROXY", "--set", "extraEnv[0].value=http://proxy:3128",
			"--set", "podLabels.team=bosh", "--set", "logFormat=console",
			"--set", "metrics.scrapeAnnotations=true", "--set", "networkPolicy.enabled=true",
			"--set", "podDisruptionBudget.maxUnavailable=1",
			"--set", "topologySpreadConstraints[0].maxSkew=1", "--set", "topologySpreadConstraints[0].topologyKey=topology.kubernetes.io/zone",
			"--set", "topologySpreadConstraints[0].whenUnsatisfiable=ScheduleAnyway",
			"--set", "securityContext.readOnlyRootFilesystem=false")
		objects := objectsOf(out, false)
		Expect(objects).NotTo(HaveKey("ServiceAccount/bosh-injector"))
		Expect(objects).To(HaveKey("NetworkPolicy/bosh-injector"))
		pdb := objects["PodDisruptionBudget/bosh-injector"]
		Expect(pdb).To(HaveKeyWithValue("spec", HaveKeyWithValue("maxUnavailable", BeEquivalentTo(1))))
		Expect(pdb["spec"]).NotTo(HaveKey("minAvailable"))
		Expect(objects["Service/bosh-injector"]["spec"]).To(HaveKeyWithValue("ports", ContainElement(HaveKeyWithValue("name", "metrics"))))

		var deploy appsv1.Deployment
		Expect(yaml.Unmarshal([]byte(mustYAML(objects["Deployment/bosh-injector"])), &deploy)).To(Succeed())
		pod := deploy.Spec.Template
		Expect(pod.Labels).To(HaveKeyWithValue("team", "bosh"))
		Expect(pod.Annotations).To(HaveKeyWithValue("prometheus.io/scrape", "true"))
		Expect(pod.Spec.ServiceAccountName).To(Equal("ops"))
		Expect(pod.Spec.PriorityClassName).To(Equal("system-cluster-critical"))
		Expect(pod.Spec.TopologySpreadConstraints).To(HaveLen(1))
		c := pod.Spec.Containers[0]
		Expect(c.Args).To(ContainElements("--log-format=console", "--leader-elect-extra"))
		Expect(c.Env).To(ContainElement(corev1.EnvVar{Name: "HTTPS_PROXY", Value: "http://proxy:3128"}))
		Expect(*c.SecurityContext.ReadOnlyRootFilesystem).To(BeFalse())
		Expect(*c.SecurityContext.AllowPrivilegeEscalation).To(BeFalse(), "the hardened defaults stay")
		Expect(*pod.Spec.SecurityContext.RunAsNonRoot).To(BeTrue())
	})

	It("with watchNamespaces, grants Roles in those namespaces only and keeps the operator, its DNS sidecar and the webhook to them", func() {
		out := helm("template", "bosh-injector", chartDir, "--namespace", namespace, "--set", "watchNamespaces={team-a,team-b}")
		objects := objectsOf(out, true)
		var clusterWide []string
		for key := range objects {
			if kind, _, _ := strings.Cut(key, "/"); kind == "ClusterRole" || kind == "ClusterRoleBinding" {
				clusterWide = append(clusterWide, key)
			}
		}
		// TokenReviews are cluster-scoped: the config server's ClusterRole
		// stays, for them alone.
		Expect(clusterWide).To(ConsistOf("ClusterRole//bosh-injector-config-server", "ClusterRoleBinding//bosh-injector-config-server"))
		Expect(objects["ClusterRole//bosh-injector-config-server"]["rules"]).To(ConsistOf(HaveKeyWithValue("resources", ConsistOf("tokenreviews"))))
		for _, ns := range []string{"team-a", "team-b"} {
			for _, name := range []string{"bosh-injector", "bosh-injector-dns", "bosh-injector-config-server-serviceaccounts"} {
				Expect(objects).To(HaveKey("Role/"+ns+"/"+name), ns)
				Expect(objects).To(HaveKey("RoleBinding/"+ns+"/"+name), ns)
			}
		}
		Expect(objects["Role/team-a/bosh-injector"]["rules"]).To(ContainElement(HaveKeyWithValue("resources", ContainElement("secrets"))))
		Expect(objects["RoleBinding/team-a/bosh-injector"]["subjects"]).To(ContainElement(HaveKeyWithValue("namespace", namespace)))

		var deploy appsv1.Deployment
		Expect(yaml.Unmarshal([]byte(mustYAML(objects["Deployment/"+namespace+"/bosh-injector"])), &deploy)).To(Succeed())
		Expect(deploy.Spec.Template.Spec.Containers[0].Args).To(ContainElement("--watch-namespaces=team-a,team-b"))
		var dns appsv1.Deployment
		Expect(yaml.Unmarshal([]byte(mustYAML(objects["Deployment/"+namespace+"/bosh-injector-dns"])), &dns)).To(Succeed())
		Expect(dns.Spec.Template.Spec.Containers).To(ContainElement(And(HaveField("Name", "dns-zones"),
			HaveField("Args", ContainElement("--watch-namespaces=team-a,team-b")))))

		var hook admissionregistrationv1.MutatingWebhookConfiguration
		Expect(yaml.Unmarshal([]byte(mustYAML(objects["MutatingWebhookConfiguration//bosh-injector"])), &hook)).To(Succeed())
		Expect(hook.Webhooks[0].NamespaceSelector.MatchExpressions).To(ContainElement(metav1.LabelSelectorRequirement{
			Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpIn, Values: []string{"team-a", "team-b"}}))

		_, err := helmErr("template", "x", chartDir, "--set", "watchNamespaces={Team_A}")
		Expect(err).To(MatchError(ContainSubstring("watchNamespaces")))
	})

	It("with dns.enabled=false, renders no CoreDNS and leaves injected pods' DNS as it is", func() {
		out := helm("template", "bosh-injector", chartDir, "--namespace", namespace, "--set", "dns.enabled=false")
		objects := objectsOf(out, false)
		Expect(objects).To(HaveKey("Deployment/bosh-injector"))
		for key := range objects {
			Expect(key).NotTo(ContainSubstring("bosh-injector-dns"))
		}
		Expect(out).NotTo(ContainSubstring("coredns"))
		var deploy appsv1.Deployment
		Expect(yaml.Unmarshal([]byte(mustYAML(objects["Deployment/bosh-injector"])), &deploy)).To(Succeed())
		Expect(deploy.Spec.Template.Spec.Containers[0].Args).NotTo(ContainElement(HavePrefix("--dns-service")))
	})

	It("installs: cert-manager issues the serving certificate and the config server's from one CA, and cainjector fills the webhook's caBundle", func() {
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

		// The config server's certificate comes from the same CA, which
		// the operator trusts it with.
		Eventually(func() ([]byte, error) {
			var tls corev1.Secret
			err := cp.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "bosh-injector-config-server-tls"}, &tls)
			return tls.Data["ca.crt"], err
		}).WithTimeout(30 * time.Second).Should(Equal(serving.Data["ca.crt"]))

		helm("upgrade", "bosh-injector", chartDir, "--namespace", namespace, "--set", "replicaCount=1")
		Expect(cp.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "bosh-injector"}, &deploy)).To(Succeed())
		Expect(*deploy.Spec.Replicas).To(BeEquivalentTo(1))

		helm("uninstall", "bosh-injector", "--namespace", namespace)
	})
})
