package kubevars_test

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bosh-injector/bosh-injector/gather/gathering/kubevars"
	"github.com/bosh-injector/bosh-injector/gather/model/manifest"
	"github.com/bosh-injector/bosh-injector/gather/model/variables"
	"github.com/bosh-injector/bosh-injector/gather/model/yamlvalue"
	"github.com/bosh-injector/bosh-injector/gather/names"
)

const defs = `
name: dep
variables:
- {name: admin_password, type: password}
- {name: db_password, type: password}
- {name: ca, type: certificate, options: {is_ca: true, common_name: test-ca}}
- name: tls
  type: certificate
  options: {ca: ca, common_name: web, alternative_names: [web.example.com, 10.0.0.1], extended_key_usage: [server_auth]}
`

var _ = Describe("variables in Secrets", func() {
	var ns string
	var n int
	BeforeEach(func() {
		n++
		ns = fmt.Sprintf("vars-%d", n)
		Expect(cp.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	})

	generate := func() *kubevars.Source {
		GinkgoHelper()
		doc, err := yamlvalue.Parse([]byte(defs))
		Expect(err).NotTo(HaveOccurred())
		vars, err := manifest.VariablesOf(doc)
		Expect(err).NotTo(HaveOccurred())
		src := kubevars.New(ctx, cp.Client, ns, "dep")
		Expect(variables.Generate(vars, src, time.Now())).To(Succeed())
		return src
	}
	secret := func(name string) *corev1.Secret {
		GinkgoHelper()
		var s corev1.Secret
		Expect(cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &s)).To(Succeed())
		return &s
	}

	It("uses a user-provided Secret verbatim and generates the others, once", func() {
		Expect(cp.Client.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "dep.var-admin-password", Namespace: ns},
			Data:       map[string][]byte{"password": []byte("chosen-by-user")},
		})).To(Succeed())
		src := generate()
		v, found, err := src.Get("admin_password")
		Expect(err).NotTo(HaveOccurred())
		Expect(found).To(BeTrue())
		Expect(v).To(Equal("chosen-by-user"))
		Expect(secret("dep.var-admin-password").Labels).NotTo(HaveKey(names.LabelManagedBy))

		generated := secret("dep.var-db-password")
		Expect(generated.Labels).To(HaveKeyWithValue(names.LabelManagedBy, names.ManagedBy))
		Expect(generated.Labels).To(HaveKeyWithValue(names.LabelSecretKind, names.KindVariable))
		Expect(generated.OwnerReferences).To(BeEmpty())
		Expect(generated.Data["password"]).To(MatchRegexp(`^[a-z0-9]{20}$`))
		tls := secret("dep.var-tls")
		Expect(tls.Data).To(HaveKey("certificate"))

		// A second gathering finds every value and generates nothing; a
		// redactor is told each value it reads.
		generate()
		Expect(secret("dep.var-db-password").Data).To(Equal(generated.Data))
		var told []any
		reader := kubevars.New(ctx, cp.Client, ns, "dep")
		reader.Remember(func(v any) { told = append(told, v) })
		_, _, err = reader.Get("db_password")
		Expect(err).NotTo(HaveOccurred())
		Expect(told).To(ConsistOf(string(generated.Data["password"])))
		Expect(secret("dep.var-tls").Data).To(Equal(tls.Data))
	})

	It("stores a certificate that verifies against its CA and carries the SANs", func() {
		generate()
		tls := secret("dep.var-tls")
		ca := secret("dep.var-ca")
		Expect(tls.Data["ca"]).To(Equal(ca.Data["certificate"]))
		roots := x509.NewCertPool()
		Expect(roots.AppendCertsFromPEM(ca.Data["certificate"])).To(BeTrue())
		block, _ := pem.Decode(tls.Data["certificate"])
		cert, err := x509.ParseCertificate(block.Bytes)
		Expect(err).NotTo(HaveOccurred())
		_, err = cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: "web.example.com", KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
		Expect(err).NotTo(HaveOccurred())
		Expect(cert.Subject.CommonName).To(Equal("web"))
		Expect(cert.IPAddresses).To(HaveLen(1))
		Expect(cert.IPAddresses[0].String()).To(Equal("10.0.0.1"))

		// ((tls)) is the map of all keys, ((tls.ca)) one key.
		src := kubevars.New(ctx, cp.Client, ns, "dep")
		out, err := variables.Interpolate(mustParse("{whole: ((tls)), ca: ((tls.ca))}"), src)
		Expect(err).NotTo(HaveOccurred())
		whole, _ := out.(*yamlvalue.Map).Get("whole")
		Expect(whole.(*yamlvalue.Map).Keys()).To(Equal([]string{"ca", "certificate", "private_key"}))
		caVal, _ := out.(*yamlvalue.Map).Get("ca")
		Expect(caVal).To(Equal(string(ca.Data["certificate"])))
	})
})

var _ = It("regenerates a deleted CA and signs its generated leaves again, keeping the rest", func() {
	ns := "vars-rotate"
	Expect(cp.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	doc, err := yamlvalue.Parse([]byte(defs))
	Expect(err).NotTo(HaveOccurred())
	vars, err := manifest.VariablesOf(doc)
	Expect(err).NotTo(HaveOccurred())
	generate := func() {
		Expect(variables.Generate(vars, kubevars.New(ctx, cp.Client, ns, "dep"), time.Now())).To(Succeed())
	}
	get := func(name string) map[string][]byte {
		var s corev1.Secret
		Expect(cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &s)).To(Succeed())
		return s.Data
	}
	generate()
	oldCA, oldTLS, password := get("dep.var-ca"), get("dep.var-tls"), get("dep.var-db-password")
	Expect(cp.Client.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "dep.var-ca"}})).To(Succeed())
	generate()
	newCA, newTLS := get("dep.var-ca"), get("dep.var-tls")
	Expect(newCA["certificate"]).NotTo(Equal(oldCA["certificate"]))
	Expect(newTLS["private_key"]).NotTo(Equal(oldTLS["private_key"]))
	Expect(newTLS["ca"]).To(Equal(newCA["certificate"]))
	Expect(get("dep.var-db-password")).To(Equal(password))
	// Unchanged CA: nothing is signed again.
	generate()
	Expect(get("dep.var-tls")).To(Equal(newTLS))
})

var _ = It("frees a variable Secret an earlier version made owned by the manifest Secret", func() {
	ns := "vars-owned"
	Expect(cp.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	manifest := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "m", Namespace: ns}}
	Expect(cp.Client.Create(ctx, manifest)).To(Succeed())
	Expect(cp.Client.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "dep.var-old", Namespace: ns,
			Labels:          map[string]string{names.LabelDeployment: "dep", names.LabelManagedBy: names.ManagedBy},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Secret", Name: "m", UID: manifest.UID}}},
		Data: map[string][]byte{"password": []byte("kept")},
	})).To(Succeed())
	v, found, err := kubevars.New(ctx, cp.Client, ns, "dep").Get("old")
	Expect(err).NotTo(HaveOccurred())
	Expect(found).To(BeTrue())
	Expect(v).To(Equal("kept"))
	var s corev1.Secret
	Expect(cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "dep.var-old"}, &s)).To(Succeed())
	Expect(s.OwnerReferences).To(BeEmpty())
	Expect(s.Labels).To(HaveKeyWithValue(names.LabelSecretKind, names.KindVariable))
})

func mustParse(s string) any {
	v, err := yamlvalue.Parse([]byte(s))
	Expect(err).NotTo(HaveOccurred())
	return v
}
