package charts_test

import (
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// decoded converts one of objectsOf's objects into its API type.
func decoded[T any](o map[string]any) *T {
	GinkgoHelper()
	var t T
	Expect(yaml.Unmarshal([]byte(mustYAML(o)), &t)).To(Succeed())
	return &t
}

// selectorOf is the labels a Service, Deployment, PodDisruptionBudget or
// NetworkPolicy selects pods by.
func selectorOf(o map[string]any) labels.Selector {
	GinkgoHelper()
	spec := o["spec"].(map[string]any)
	sel, ok := spec["selector"].(map[string]any)
	if !ok {
		sel = spec["podSelector"].(map[string]any)
	}
	if m, ok := sel["matchLabels"].(map[string]any); ok {
		sel = m
	}
	set := labels.Set{}
	for k, v := range sel {
		set[k] = v.(string)
	}
	return labels.SelectorFromSet(set)
}

var _ = Describe("the chart's config server", func() {
	const (
		cs        = "bosh-injector-config-server"
		caDir     = "/etc/bosh-injector/config-server-ca/"
		operator  = "Deployment/bosh-injector"
		csTLS     = cs + "-tls"
		csCAMap   = cs + "-ca"
		extURL    = "https://credhub.example.com:8844/api"
		uaaURL    = "https://uaa.example.com:8443"
		uaaSecret = "director-uaa-client"
	)
	render := func(set ...string) map[string]map[string]any {
		GinkgoHelper()
		args := []string{"template", "bosh-injector", chartDir, "--namespace", namespace}
		for _, s := range set {
			args = append(args, "--set", s)
		}
		return objectsOf(helm(args...), false)
	}
	externalValues := []string{"configServer.mode=external", "configServer.directorName=my-bosh",
		"configServer.external.url=" + extURL, "configServer.external.caCert=CREDHUB-CA-PEM",
		"configServer.external.uaa.url=" + uaaURL, "configServer.external.uaa.clientId=director",
		"configServer.external.uaa.clientSecret.secretName=" + uaaSecret, "configServer.external.uaa.caCert=UAA-CA-PEM",
		"configServer.external.publicKey=UAA-KEY-PEM"}

	It("runs the embedded server in pods of its own, which no selector of the operator or CoreDNS picks", func() {
		objects := render("configServer.embedded.clients[0].name=director", "configServer.embedded.clients[0].secretName=director-client",
			"networkPolicy.enabled=true")
		deploy := decoded[appsv1.Deployment](objects["Deployment/"+cs])
		csPods := labels.Set(deploy.Spec.Template.Labels)
		operatorPods := labels.Set(decoded[appsv1.Deployment](objects[operator]).Spec.Template.Labels)
		for _, key := range []string{"Service/bosh-injector", operator, "PodDisruptionBudget/bosh-injector", "NetworkPolicy/bosh-injector",
			"Service/bosh-injector-dns", "Deployment/bosh-injector-dns"} {
			Expect(selectorOf(objects[key]).Matches(csPods)).To(BeFalse(), key)
		}
		for _, key := range []string{"Service/" + cs, "Deployment/" + cs, "PodDisruptionBudget/" + cs, "NetworkPolicy/" + cs} {
			Expect(selectorOf(objects[key]).Matches(csPods)).To(BeTrue(), key)
			Expect(selectorOf(objects[key]).Matches(operatorPods)).To(BeFalse(), key)
		}

		Expect(*deploy.Spec.Replicas).To(BeEquivalentTo(2))
		pod := deploy.Spec.Template.Spec
		Expect(pod.ServiceAccountName).To(Equal(cs))
		Expect(pod.AutomountServiceAccountToken).To(Equal(ptr.To(true)))
		Expect(pod.Affinity.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution[0].PodAffinityTerm.LabelSelector.MatchLabels).
			To(Equal(deploy.Spec.Selector.MatchLabels))
		c := pod.Containers[0]
		Expect(c.Args).To(ContainElements("config-server", "--namespace=$(POD_NAMESPACE)", "--director-name=bosh-injector",
			"--client=director=director-client", "--signing-key-secret="+cs+"-token-key", "--listen=:8844", "--spare-keys=128", "--log-level=info"))
		Expect(c.Ports).To(ConsistOf(corev1.ContainerPort{Name: "https", ContainerPort: 8844}))
		for _, probe := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe} {
			Expect(probe.HTTPGet.Path).To(Equal("/health"))
			Expect(probe.HTTPGet.Scheme).To(Equal(corev1.URISchemeHTTPS))
			Expect(probe.HTTPGet.Port.String()).To(Equal("https"))
		}
		Expect(c.VolumeMounts).To(ConsistOf(corev1.VolumeMount{Name: "tls", MountPath: "/etc/bosh-injector/config-server-tls", ReadOnly: true}))
		Expect(pod.Volumes).To(ConsistOf(corev1.Volume{Name: "tls",
			VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: csTLS}}}))
		Expect(*c.SecurityContext.ReadOnlyRootFilesystem).To(BeTrue(), "the operator's securityContext")

		Expect(objects["Service/"+cs]["spec"]).To(HaveKeyWithValue("ports",
			ConsistOf(HaveKeyWithValue("targetPort", "https"))))
		Expect(objects["PodDisruptionBudget/"+cs]["spec"]).To(HaveKeyWithValue("minAvailable", BeEquivalentTo(1)))
		Expect(objects["Role/"+cs]["rules"]).To(ConsistOf(And(HaveKeyWithValue("resources", ConsistOf("secrets")),
			HaveKeyWithValue("verbs", ConsistOf("get", "list", "create", "patch", "delete")))))
		Expect(objects["ClusterRole/"+cs]["rules"]).To(ConsistOf(HaveKeyWithValue("resources", ConsistOf("tokenreviews")),
			HaveKeyWithValue("resources", ConsistOf("serviceaccounts"))))
		Expect(objects["NetworkPolicy/"+cs]["spec"]).To(HaveKeyWithValue("ingress", ConsistOf(HaveKeyWithValue("ports", ConsistOf(map[string]any{"port": "https"})))))
		Expect(objects["Certificate/"+cs]["spec"]).To(And(HaveKeyWithValue("secretName", csTLS),
			HaveKeyWithValue("issuerRef", HaveKeyWithValue("name", "bosh-injector-ca"))))

		Expect(render("configServer.embedded.replicas=1")).NotTo(HaveKey("PodDisruptionBudget/" + cs))
	})

	It("puts extraNames that are IP addresses on its certificate's ipAddresses, the rest on its dnsNames", func() {
		objects := render("configServer.embedded.extraNames={localhost,10.0.0.7,fd00::7,credhub.example.com}")
		Expect(objects["Certificate/"+cs]["spec"]).To(And(
			HaveKeyWithValue("dnsNames", Equal([]any{cs, cs + "." + namespace, cs + "." + namespace + ".svc",
				cs + "." + namespace + ".svc.cluster.local", "localhost", "credhub.example.com"})),
			HaveKeyWithValue("ipAddresses", Equal([]any{"10.0.0.7", "fd00::7"}))))
		Expect(render()["Certificate/"+cs]["spec"]).NotTo(HaveKey("ipAddresses"))
	})

	DescribeTable("gives the operator its config server in each mode, and runs one only in embedded mode",
		func(set []string, wantArgs []string, wantCA *corev1.VolumeSource, wantObjects []string) {
			objects := render(set...)
			c := decoded[appsv1.Deployment](objects[operator]).Spec.Template.Spec
			var args []string
			for _, a := range c.Containers[0].Args {
				if strings.HasPrefix(a, "--config-server-") || strings.HasPrefix(a, "--uaa-") || strings.HasPrefix(a, "--director-name") {
					args = append(args, a)
				}
			}
			Expect(args).To(Equal(wantArgs))

			var ca *corev1.VolumeSource
			for _, v := range c.Volumes {
				if v.Name == "config-server-ca" {
					ca = &v.VolumeSource
				}
			}
			Expect(ca).To(Equal(wantCA))
			mount := corev1.VolumeMount{Name: "config-server-ca", MountPath: strings.TrimSuffix(caDir, "/"), ReadOnly: true}
			if wantCA != nil {
				Expect(c.Containers[0].VolumeMounts).To(ContainElement(mount))
			} else {
				Expect(c.Containers[0].VolumeMounts).NotTo(ContainElement(mount))
			}

			var csObjects []string
			for key := range objects {
				if strings.Contains(key, "config-server") {
					csObjects = append(csObjects, key)
				}
			}
			Expect(csObjects).To(ConsistOf(wantObjects))
		},
		Entry("embedded, the default", nil,
			[]string{"--config-server-mode=embedded", "--director-name=bosh-injector",
				"--config-server-url=https://" + cs + "." + namespace + ".svc:8844/api/", "--config-server-ca-file=" + caDir + "ca.crt"},
			// Optional: the operator starts before cert-manager issued it.
			&corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: csTLS, Optional: ptr.To(true),
				Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
			[]string{"ServiceAccount/" + cs, "Role/" + cs, "RoleBinding/" + cs, "ClusterRole/" + cs, "ClusterRoleBinding/" + cs,
				"Service/" + cs, "Deployment/" + cs, "PodDisruptionBudget/" + cs, "Certificate/" + cs}),
		Entry("external, with UAA and every CA", externalValues,
			[]string{"--config-server-mode=external", "--director-name=my-bosh", "--config-server-url=" + extURL,
				"--config-server-ca-file=" + caDir + "ca.crt", "--uaa-url=" + uaaURL, "--uaa-client-id=director",
				"--uaa-client-secret-secret=" + uaaSecret, "--uaa-client-secret-key=secret", "--uaa-ca-file=" + caDir + "uaa-ca.crt",
				"--config-server-public-key-file=" + caDir + "public-key.pem"},
			&corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: csCAMap}}},
			[]string{"ConfigMap/" + csCAMap}),
		Entry("external, a URL only", []string{"configServer.mode=external", "configServer.external.url=" + extURL},
			[]string{"--config-server-mode=external", "--director-name=bosh-injector", "--config-server-url=" + extURL},
			nil, nil),
		// Values of the other modes are ignored.
		Entry("secrets", []string{"configServer.mode=secrets", "configServer.external.caCert=CREDHUB-CA-PEM"},
			[]string{"--config-server-mode=secrets", "--director-name=bosh-injector"},
			nil, nil),
	)

	It("gives the operator and the embedded server each namespace's director name", func() {
		objects := render("configServer.namespaceDirectorNames.cf=my-bosh", "configServer.namespaceDirectorNames.cf-2=other_bosh")
		for _, key := range []string{operator, "Deployment/" + cs} {
			Expect(decoded[appsv1.Deployment](objects[key]).Spec.Template.Spec.Containers[0].Args).To(ContainElements(
				"--director-name=bosh-injector", "--namespace-director-name=cf=my-bosh", "--namespace-director-name=cf-2=other_bosh"), key)
		}
	})

	It("in external mode, gives the operator the CAs and key in a ConfigMap and lets it read the UAA client secret", func() {
		objects := render(externalValues...)
		Expect(objects["ConfigMap/"+csCAMap]["data"]).To(Equal(map[string]any{
			"ca.crt": "CREDHUB-CA-PEM", "uaa-ca.crt": "UAA-CA-PEM", "public-key.pem": "UAA-KEY-PEM"}))
		Expect(objects["Role/bosh-injector-leader-election"]["rules"]).To(ContainElement(And(HaveKeyWithValue("resources", ConsistOf("secrets")),
			HaveKeyWithValue("resourceNames", ConsistOf(uaaSecret)), HaveKeyWithValue("verbs", ConsistOf("get")))))
		Expect(render()["Role/bosh-injector-leader-election"]["rules"]).NotTo(ContainElement(HaveKeyWithValue("resources", ContainElement("secrets"))))
	})
})
