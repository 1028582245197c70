package configserver_test

import (
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"net/http"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/bosh-injector/bosh-injector/gather/configserver/credhub"
)

// A CA rotated in CredHub's transitional steps (credhub-release's
// docs/ca-rotation.md, with credhub curl), each step followed by a deploy
// that asks for the CA and its certificate as the director does
// (generate, no-overwrite): at every step, instances deployed before and
// after it trust each other's certificate.
var _ = Describe("rotating a CA in CredHub's transitional steps", func() {
	It("gives what the CA signs both CAs while it rotates, so old and new instances trust each other throughout", func() {
		token := tokenFor(server.url, clientName, clientSecret)
		do := func(method, path string, body any) answer {
			GinkgoHelper()
			return call(server.url, method, path, token, body)
		}
		// deploy is what a deploy reads: the leaf's ca and certificate.
		type leaf struct{ id, ca, certificate string }
		deploy := func() leaf {
			GinkgoHelper()
			ca := do(http.MethodPost, "/api/v1/data", map[string]any{"name": "/rot/ca", "type": "certificate", "mode": "no-overwrite",
				"parameters": map[string]any{"common_name": "rotating ca", "is_ca": true}})
			Expect(ca.status).To(Equal(http.StatusOK), ca.body)
			a := do(http.MethodPost, "/api/v1/data", map[string]any{"name": "/rot/leaf", "type": "certificate", "mode": "no-overwrite",
				"parameters": map[string]any{"common_name": "leaf", "ca": "/rot/ca", "extended_key_usage": []string{"server_auth", "client_auth"}}})
			Expect(a.status).To(Equal(http.StatusOK), a.body)
			v := a.json()["value"].(map[string]any)
			return leaf{id: a.json()["id"].(string), ca: v["ca"].(string), certificate: v["certificate"].(string)}
		}
		// mutual: an instance with a and one with b accept each other's
		// certificate.
		mutual := func(a, b leaf) {
			GinkgoHelper()
			Expect(trusts(a.ca, b.certificate)).To(BeTrue(), "the older trusts the newer")
			Expect(trusts(b.ca, a.certificate)).To(BeTrue(), "the newer trusts the older")
			openSSLVerify(a.ca, b.certificate)
			openSSLVerify(b.ca, a.certificate)
		}

		before := deploy()
		Expect(pemCount(before.ca)).To(Equal(1))
		list := do(http.MethodGet, "/api/v1/certificates?name=/rot/ca", nil)
		Expect(list.status).To(Equal(http.StatusOK), list.body)
		id := list.json()["certificates"].([]any)[0].(map[string]any)["id"].(string)
		oldVersion := list.json()["certificates"].([]any)[0].(map[string]any)["versions"].([]any)[0].(map[string]any)["id"].(string)
		certificates := "/api/v1/certificates/" + id

		// 1. A new CA, transitional: the leaf gets a new version trusting
		// both; the CA's current version is still the old one.
		n := do(http.MethodPost, certificates+"/regenerate", map[string]any{"set_as_transitional": true})
		Expect(n.status).To(Equal(http.StatusOK), n.body)
		Expect(n.json()).To(And(HaveKeyWithValue("transitional", true), HaveKeyWithValue("certificate_authority", true),
			HaveKeyWithValue("duration_overridden", false), HaveKeyWithValue("duration_used", BeEquivalentTo(365)),
			HaveKeyWithValue("key_length", BeEquivalentTo(2048))))
		newVersion := n.json()["id"].(string)
		again := do(http.MethodPost, certificates+"/regenerate", map[string]any{"set_as_transitional": true})
		Expect(again.status).To(Equal(http.StatusBadRequest), again.body)
		Expect(again.json()).To(Equal(map[string]any{"error": credhub.TooManyTransitional}))
		currents := do(http.MethodGet, "/api/v1/data?current=true&name=/rot/ca", nil).json()["data"].([]any)
		Expect(currents).To(HaveLen(2))
		Expect(currents[0]).To(And(HaveKeyWithValue("id", oldVersion), HaveKeyWithValue("transitional", false)))
		Expect(currents[1]).To(And(HaveKeyWithValue("id", newVersion), HaveKeyWithValue("transitional", true)))
		step1 := deploy()
		Expect(step1.id).NotTo(Equal(before.id), "a new version the deploy picks up")
		Expect(step1.certificate).To(Equal(before.certificate))
		Expect(pemCount(step1.ca)).To(Equal(2))
		mutual(before, step1)

		// 2. The new CA signs from now on: the mark moves to the old one.
		// The answer shows each version's ca alone.
		expectAnswer := func(a answer, status int, message string) {
			GinkgoHelper()
			Expect(a.status).To(Equal(status), a.body)
			Expect(a.json()).To(Equal(map[string]any{"error": message}))
		}
		expectAnswer(do(http.MethodPut, certificates+"/update_transitional_version", map[string]any{"version": step1.id}), 400, credhub.VersionMismatch)
		// credhub curl without -d sends null: no request to move the mark.
		noBody := call(server.url, http.MethodPut, certificates+"/update_transitional_version", token, json.RawMessage("null"))
		Expect(noBody.status).To(Equal(http.StatusBadRequest), noBody.body)
		expectAnswer(do(http.MethodPut, "/api/v1/certificates/00000000-0000-0000-0000-000000000000/update_transitional_version", map[string]any{"version": nil}), 404, credhub.ResourceNotFound)
		moved := do(http.MethodPut, certificates+"/update_transitional_version", map[string]any{"version": oldVersion})
		Expect(moved.status).To(Equal(http.StatusOK), moved.body)
		var pair []map[string]any
		Expect(moved.decode(&pair)).To(Succeed())
		Expect(pair).To(HaveLen(2))
		Expect(pair[0]).To(And(HaveKeyWithValue("id", newVersion), HaveKeyWithValue("transitional", false)))
		Expect(pair[1]).To(And(HaveKeyWithValue("id", oldVersion), HaveKeyWithValue("transitional", true)))
		Expect(pemCount(pair[0]["value"].(map[string]any)["ca"].(string))).To(Equal(1))
		step2 := deploy()
		Expect(step2.certificate).To(Equal(before.certificate), "still signed by the old CA until regenerated")
		mutual(step1, step2)

		// 3. What the CA signs is signed anew, by the new CA.
		bulk := do(http.MethodPost, "/api/v1/bulk-regenerate", map[string]any{"signed_by": "/rot/ca"})
		Expect(bulk.status).To(Equal(http.StatusOK), bulk.body)
		step3 := deploy()
		Expect(step3.certificate).NotTo(Equal(before.certificate))
		Expect(pemCount(step3.ca)).To(Equal(2))
		mutual(step2, step3)

		// 4. The rotation ends: the leaf trusts the new CA alone.
		cleared := do(http.MethodPut, certificates+"/update_transitional_version", map[string]any{"version": nil})
		Expect(cleared.status).To(Equal(http.StatusOK), cleared.body)
		Expect(cleared.decode(&pair)).To(Succeed())
		Expect(pair).To(ConsistOf(And(HaveKeyWithValue("id", newVersion), HaveKeyWithValue("transitional", false))))
		after := deploy()
		Expect(after.certificate).To(Equal(step3.certificate))
		Expect(pemCount(after.ca)).To(Equal(1))
		mutual(step3, after)
		Expect(trusts(after.ca, before.certificate)).To(BeFalse(), "the old CA is no longer trusted")

		versions := do(http.MethodGet, certificates+"/versions", nil)
		Expect(versions.status).To(Equal(http.StatusOK), versions.body)
		var all []map[string]any
		Expect(versions.decode(&all)).To(Succeed())
		Expect(all).To(HaveLen(2))
		Expect(all[0]).To(HaveKeyWithValue("id", newVersion))
	})

	It("rotates a CA made elsewhere with versions set, not generated, and deletes versions but the last", func() {
		token := tokenFor(server.url, clientName, clientSecret)
		do := func(method, path string, body any) answer {
			GinkgoHelper()
			return call(server.url, method, path, token, body)
		}
		expectAnswer := func(a answer, status int, message string) {
			GinkgoHelper()
			Expect(a.status).To(Equal(status), a.body)
			Expect(a.json()).To(Equal(map[string]any{"error": message}))
		}
		// made is a CA made outside the server: its certificate and key.
		made := func(name string) map[string]any {
			GinkgoHelper()
			a := do(http.MethodPost, "/api/v1/data", map[string]any{"name": name, "type": "certificate",
				"parameters": map[string]any{"common_name": name, "is_ca": true}})
			Expect(a.status).To(Equal(http.StatusOK), a.body)
			v := a.json()["value"].(map[string]any)
			return map[string]any{"certificate": v["certificate"], "private_key": v["private_key"]}
		}
		oldCA, newCA := made("/elsewhere/old"), made("/elsewhere/new")
		set := do(http.MethodPut, "/api/v1/data", map[string]any{"name": "/set/ca", "type": "certificate", "value": oldCA})
		Expect(set.status).To(Equal(http.StatusOK), set.body)
		oldVersion := set.json()["id"].(string)
		leaf := func() (ca, certificate string) {
			GinkgoHelper()
			a := do(http.MethodPost, "/api/v1/data", map[string]any{"name": "/set/leaf", "type": "certificate", "mode": "no-overwrite",
				"parameters": map[string]any{"common_name": "leaf", "ca": "/set/ca"}})
			Expect(a.status).To(Equal(http.StatusOK), a.body)
			v := a.json()["value"].(map[string]any)
			return v["ca"].(string), v["certificate"].(string)
		}
		_, before := leaf()
		id := do(http.MethodGet, "/api/v1/certificates?name=/set/ca", nil).json()["certificates"].([]any)[0].(map[string]any)["id"].(string)
		versions := "/api/v1/certificates/" + id + "/versions"

		expectAnswer(do(http.MethodPost, versions, map[string]any{"transitional": true}), 400, credhub.MissingValue)
		expectAnswer(do(http.MethodPost, versions, map[string]any{"value": newCA, "transitional": true, "ttl": 1}), 400, credhub.InvalidJSONKey("ttl"))
		n := do(http.MethodPost, versions, map[string]any{"value": newCA, "transitional": true})
		Expect(n.status).To(Equal(http.StatusOK), n.body)
		Expect(n.json()).To(HaveKeyWithValue("transitional", true))
		Expect(n.json()["value"]).To(HaveKeyWithValue("certificate", newCA["certificate"]))
		newVersion := n.json()["id"].(string)
		expectAnswer(do(http.MethodPost, versions, map[string]any{"value": newCA, "transitional": true}), 400, credhub.TooManyTransitional)
		// The leaf trusts both CAs; the old one still signs.
		ca, certificate := leaf()
		Expect(certificate).To(Equal(before))
		Expect(pemCount(ca)).To(Equal(2))
		Expect(trusts(ca, certificate)).To(BeTrue())

		// The transitional version deleted: the leaf trusts the old CA
		// alone again.
		expectAnswer(do(http.MethodDelete, versions+"/00000000-0000-0000-0000-000000000000", nil), 404, credhub.ResourceNotFound)
		deleted := do(http.MethodDelete, versions+"/"+newVersion, nil)
		Expect(deleted.status).To(Equal(http.StatusOK), deleted.body)
		Expect(deleted.json()).To(HaveKeyWithValue("id", newVersion))
		ca, _ = leaf()
		Expect(pemCount(ca)).To(Equal(1))
		Expect(do(http.MethodGet, "/api/v1/data/"+newVersion, nil).status).To(Equal(http.StatusNotFound))
		expectAnswer(do(http.MethodDelete, versions+"/"+oldVersion, nil), 400, credhub.CannotDeleteLastVersion)
		Expect(do(http.MethodGet, "/api/v1/data/"+oldVersion, nil).status).To(Equal(http.StatusOK))
	})
})

// pemCount is how many certificates a PEM bundle holds.
func pemCount(bundle string) int {
	n := 0
	for rest := []byte(bundle); ; n++ {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			return n
		}
	}
}

// trusts says whether a certificate verifies against a PEM bundle of CAs,
// as a TLS peer given that bundle checks it.
func trusts(bundle, certificate string) bool {
	GinkgoHelper()
	pool := x509.NewCertPool()
	Expect(pool.AppendCertsFromPEM([]byte(bundle))).To(BeTrue())
	b, _ := pem.Decode([]byte(certificate))
	Expect(b).NotTo(BeNil())
	cert, err := x509.ParseCertificate(b.Bytes)
	Expect(err).NotTo(HaveOccurred())
	_, err = cert.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
	return err == nil
}
