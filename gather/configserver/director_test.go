package configserver_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bosh-injector/bosh-injector/gather/configserver/director"
	"github.com/bosh-injector/bosh-injector/gather/model/deployment"
	"github.com/bosh-injector/bosh-injector/gather/model/yamlvalue"
	"github.com/bosh-injector/bosh-injector/gather/names"
)

// The director's side (package director) against the server: what a
// gathering does with a deployment's variables.
var _ = Describe("a deployment's variables through the director's client", func() {
	const team = "director-team"
	manifest := []byte(`
name: market
variables:
- {name: db_password, type: password, options: {length: 20}}
- {name: shop_ca, type: certificate, options: {is_ca: true, common_name: shop-ca}}
- {name: shop_tls, type: certificate, options: {ca: shop_ca, common_name: shop.internal}}
tags:
  password: ((db_password))
  ca: ((shop_tls.ca))
  shared: ((/shared/secret))
`)
	var source func(pinned map[string]string) *director.Source
	var admin string

	BeforeEach(func() {
		Expect(client.IgnoreAlreadyExists(cp.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: team}}))).To(Succeed())
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: team, Name: "market-gather",
			Labels:      map[string]string{names.LabelManagedBy: names.ManagedBy},
			Annotations: map[string]string{director.AnnotationDeployment: "market", director.AnnotationGrants: `["/shared/secret"]`}}}
		Expect(client.IgnoreAlreadyExists(cp.Client.Create(ctx, sa))).To(Succeed())
		tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{Audiences: []string{director.Audience}, ExpirationSeconds: ptr.To[int64](600)}}
		Expect(cp.Client.SubResource("token").Create(ctx, sa, tr)).To(Succeed())
		// The token file, as the kubelet projects it.
		tokenFile := filepath.Join(GinkgoT().TempDir(), "token")
		Expect(os.WriteFile(tokenFile, []byte(tr.Status.Token), 0o600)).To(Succeed())
		// CredHub's URL with /api/, as bosh-deployment gives it.
		c, err := director.NewClient(server.url+"/api/", certs.Client, director.TokenFile(tokenFile))
		Expect(err).NotTo(HaveOccurred())
		source = func(pinned map[string]string) *director.Source {
			return director.NewSource(context.Background(), c, directorName, "market", pinned)
		}
		admin = tokenFor(server.url, clientName, clientSecret)
		Expect(call(server.url, http.MethodPut, "/api/v1/data", admin, map[string]any{"name": "/shared/secret", "type": "value", "value": "shared-value"}).status).To(Equal(200))
	})

	property := func(doc *yamlvalue.Map, key string) any {
		props, _ := doc.Get("tags")
		v, _ := props.(*yamlvalue.Map).Get(key)
		return v
	}

	It("generates on the server under /<director>/<deployment>/, keeps what exists, and reads pinned ids", func() {
		src := source(nil)
		m, err := deployment.Load(manifest, nil, src, time.Now())
		Expect(err).NotTo(HaveOccurred())
		pw := property(m.Raw, "password").(string)
		Expect(pw).To(HaveLen(20))
		Expect(property(m.Raw, "shared")).To(Equal("shared-value"))
		stored := call(server.url, http.MethodGet, "/api/v1/data?name=/my-bosh/market/db_password&current=true", admin, nil)
		Expect(stored.status).To(Equal(200))
		Expect(stored.json()["data"].([]any)[0].(map[string]any)["value"]).To(Equal(pw))
		// The leaf is signed by the server's CA of the same deployment.
		Expect(property(m.Raw, "ca")).To(ContainSubstring("BEGIN CERTIFICATE"))
		set := src.Set()
		Expect(set).To(HaveKey("/my-bosh/market/shop_tls"))
		Expect(set).To(HaveKey("/shared/secret"))

		// A value put as `credhub set` puts it: a string is of type value.
		Expect(src.Put("given", "given-by-hand")).To(Succeed())
		given := call(server.url, http.MethodGet, "/api/v1/data?name=/my-bosh/market/given&current=true", admin, nil)
		Expect(given.json()["data"].([]any)[0]).To(And(HaveKeyWithValue("type", "value"), HaveKeyWithValue("value", "given-by-hand")))

		// no-overwrite: the next deploy keeps the values.
		again, err := deployment.Load(manifest, nil, source(nil), time.Now())
		Expect(err).NotTo(HaveOccurred())
		Expect(property(again.Raw, "password")).To(Equal(pw))

		// A value set since is what a new deploy takes; a deploy pinned to
		// the recorded set still reads the old one, by id.
		Expect(call(server.url, http.MethodPut, "/api/v1/data", admin, map[string]any{"name": "/my-bosh/market/db_password", "type": "password", "value": "rotated-password"}).status).To(Equal(200))
		latest, err := deployment.Load(manifest, nil, source(nil), time.Now())
		Expect(err).NotTo(HaveOccurred())
		Expect(property(latest.Raw, "password")).To(Equal("rotated-password"))
		pinned, err := deployment.Load(manifest, nil, source(set), time.Now())
		Expect(err).NotTo(HaveOccurred())
		Expect(property(pinned.Raw, "password")).To(Equal(pw))
	})

	It("reports every missing variable in the director's words, with the server's 404", func() {
		_, err := deployment.Load([]byte("name: market\ntags: {a: ((missing_one)), b: ((missing_two.key)), c: ((/not/granted))}\n"), nil, source(nil), time.Now())
		Expect(err).To(MatchError(
			"- Failed to find variable '/my-bosh/market/missing_one' from config server: HTTP Code '404', Error: 'The request could not be completed because the credential does not exist or you do not have sufficient authorization.'\n" +
				"- Failed to find variable '/my-bosh/market/missing_two' from config server: HTTP Code '404', Error: 'The request could not be completed because the credential does not exist or you do not have sufficient authorization.'\n" +
				"- Failed to find variable '/not/granted' from config server: HTTP Code '404', Error: 'The request could not be completed because the credential does not exist or you do not have sufficient authorization.'"))
	})

	It("converges a variable whose options changed when the manifest asks, as the director's update_mode", func() {
		m1 := []byte("name: market\nvariables: [{name: token, type: password, options: {length: 12}}]\ntags: {t: ((token))}\n")
		first, err := deployment.Load(m1, nil, source(nil), time.Now())
		Expect(err).NotTo(HaveOccurred())
		Expect(property(first.Raw, "t")).To(HaveLen(12))
		m2 := []byte("name: market\nfeatures: {converge_variables: true}\nvariables: [{name: token, type: password, options: {length: 16}}]\ntags: {t: ((token))}\n")
		second, err := deployment.Load(m2, nil, source(nil), time.Now())
		Expect(err).NotTo(HaveOccurred())
		Expect(property(second.Raw, "t")).To(HaveLen(16))
		m3 := []byte("name: market\nvariables: [{name: token, type: password, update_mode: no-overwrite, options: {length: 24}}]\ntags: {t: ((token))}\n")
		third, err := deployment.Load(m3, nil, source(nil), time.Now())
		Expect(err).NotTo(HaveOccurred())
		Expect(property(third.Raw, "t")).To(Equal(property(second.Raw, "t")))
	})

	It("gets tokens from the UAA with client credentials, as a director configured for an external server", func() {
		cc := &director.ClientCredentials{TokenURL: server.url + "/oauth/token", ClientID: clientName, ClientSecret: clientSecret, HTTP: certs.Client}
		c, err := director.NewClient(server.url+"/api/", certs.Client, cc)
		Expect(err).NotTo(HaveOccurred())
		src := director.NewSource(context.Background(), c, directorName, "elsewhere", nil)
		m, err := deployment.Load([]byte("name: elsewhere\nvariables: [{name: pw, type: password}]\ntags: {p: ((pw))}\n"), nil, src, time.Now())
		Expect(err).NotTo(HaveOccurred())
		Expect(property(m.Raw, "p")).To(HaveLen(30))
		Expect(src.Set()).To(HaveKey("/my-bosh/elsewhere/pw"))

		wrong := &director.ClientCredentials{TokenURL: server.url + "/oauth/token", ClientID: clientName, ClientSecret: "wrong", HTTP: certs.Client}
		c, err = director.NewClient(server.url+"/api/", certs.Client, wrong)
		Expect(err).NotTo(HaveOccurred())
		_, err = deployment.Load([]byte("name: elsewhere\ntags: {p: ((pw))}\n"), nil, director.NewSource(context.Background(), c, directorName, "elsewhere", nil), time.Now())
		Expect(err).To(MatchError(ContainSubstring("refused client 'director' a token: HTTP Code '401'")))
		Expect(err.Error()).NotTo(ContainSubstring("wrong"))
	})

	It("tells a server that cannot be reached from a wrong variable", func() {
		c, err := director.NewClient("https://127.0.0.1:1/api/", certs.Client, nil)
		Expect(err).NotTo(HaveOccurred())
		_, err = deployment.Load([]byte("name: market\ntags: {p: ((pw))}\n"), nil, director.NewSource(context.Background(), c, directorName, "market", nil), time.Now())
		var unreachable *director.Unreachable
		Expect(errors.As(err, &unreachable)).To(BeTrue(), "%v", err)
	})
})
