package configserver_test

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/bosh-injector/bosh-injector/gather/configserver/credhub"
)

var uuidPattern = `^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`

// instantPattern is Jackson's Instant, as CredHub writes version_created_at.
var instantPattern = `^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$`

var _ = Describe("CredHub's API", func() {
	var token string
	BeforeEach(func() { token = tokenFor(server.url, clientName, clientSecret) })

	get := func(path string) answer { GinkgoHelper(); return call(server.url, http.MethodGet, path, token, nil) }
	put := func(body any) answer {
		GinkgoHelper()
		return call(server.url, http.MethodPut, "/api/v1/data", token, body)
	}
	post := func(body any) answer {
		GinkgoHelper()
		return call(server.url, http.MethodPost, "/api/v1/data", token, body)
	}
	expectError := func(a answer, status int, message string) {
		GinkgoHelper()
		Expect(a.status).To(Equal(status), a.body)
		Expect(a.json()).To(Equal(map[string]any{"error": message}))
	}

	It("answers /info and /health as CredHub, without a token", func() {
		a := call(server.url, http.MethodGet, "/info", "", nil)
		Expect(a.status).To(Equal(http.StatusOK))
		Expect(a.json()).To(Equal(map[string]any{"auth-server": map[string]any{"url": server.url}, "app": map[string]any{"name": "CredHub"}}))
		a = call(server.url, http.MethodGet, "/health", "", nil)
		Expect(a.status).To(Equal(http.StatusOK))
		Expect(a.json()).To(Equal(map[string]any{"status": "UP"}))
	})

	It("sets, versions and reads credentials of every type in CredHub's shapes", func() {
		a := put(map[string]any{"name": "/shapes/value", "type": "value", "value": "v1", "metadata": map[string]any{"description": "d"}})
		Expect(a.status).To(Equal(http.StatusOK), a.body)
		first := a.json()
		Expect(first).To(HaveKeyWithValue("id", MatchRegexp(uuidPattern)))
		Expect(first).To(HaveKeyWithValue("version_created_at", MatchRegexp(instantPattern)))
		Expect(first).To(Equal(map[string]any{"type": "value", "version_created_at": first["version_created_at"], "id": first["id"],
			"name": "/shapes/value", "metadata": map[string]any{"description": "d"}, "value": "v1"}))
		// Without the leading slash the name is the same credential.
		second := put(map[string]any{"name": "shapes/value", "type": "value", "value": "v2"}).json()
		Expect(second["id"]).NotTo(Equal(first["id"]))
		Expect(second).To(HaveKeyWithValue("metadata", BeNil()))

		all := get("/api/v1/data?name=/shapes/value").json()["data"].([]any)
		Expect(all).To(HaveLen(2))
		Expect(all[0].(map[string]any)["value"]).To(Equal("v2"))
		Expect(all[1].(map[string]any)["value"]).To(Equal("v1"))
		Expect(get("/api/v1/data?name=/shapes/value&current=true").json()["data"]).To(HaveLen(1))
		Expect(get("/api/v1/data?name=shapes/value&versions=1").json()["data"].([]any)[0].(map[string]any)["id"]).To(Equal(second["id"]))
		// The old version stays readable by id.
		Expect(get("/api/v1/data/" + first["id"].(string)).json()).To(Equal(first))

		for typ, value := range map[string]any{
			"password": "pw",
			"json":     map[string]any{"k": []any{"a", 1.0}},
			"rsa":      map[string]any{"public_key": "pub", "private_key": "priv"},
		} {
			a := put(map[string]any{"name": "/shapes/" + typ, "type": typ, "value": value})
			Expect(a.status).To(Equal(http.StatusOK), a.body)
			Expect(a.json()["value"]).To(Equal(value))
		}
		user := put(map[string]any{"name": "/shapes/user", "type": "user", "value": map[string]any{"username": "u", "password": "p"}}).json()
		hash := user["value"].(map[string]any)["password_hash"].(string)
		Expect(hash).To(MatchRegexp(`^\$6\$[./0-9A-Za-z]{16}\$[./0-9A-Za-z]{86}$`))
		Expect(user["value"]).To(Equal(map[string]any{"username": "u", "password": "p", "password_hash": hash}))
		// The hash keeps its salt from read to read, as CredHub's does.
		Expect(get("/api/v1/data/" + user["id"].(string)).json()["value"]).To(Equal(user["value"]))
	})

	It("answers CredHub's errors with its codes and texts", func() {
		expectError(get("/api/v1/data?name=/does/not/exist"), 404, credhub.ResourceNotFound)
		expectError(get("/api/v1/data/00000000-0000-0000-0000-000000000000"), 404, credhub.ResourceNotFound)
		expectError(get("/api/v1/data/not-a-uuid"), 404, credhub.ResourceNotFound)
		expectError(get("/api/v1/data?name="), 400, "The query parameter name is required for this request.")
		expectError(get("/api/v1/data?name=/x&current=true&versions=2"), 400, credhub.CantUseVersionsAndCurrent)
		expectError(get("/api/v1/data?name=/x&versions=-1"), 400, "The query parameter versions was not valid for this request.")
		expectError(put(map[string]any{"name": "/e/x", "type": "bogus", "value": "v"}), 400, credhub.InvalidTypeSet)
		expectError(put(map[string]any{"name": "/e/x//y", "type": "value", "value": "v"}), 400, credhub.InvalidSlashInName)
		expectError(put(map[string]any{"name": "/e/x y", "type": "value", "value": "v"}), 400, credhub.InvalidCharacterInName)
		expectError(put(map[string]any{"type": "value", "value": "v"}), 400, credhub.MissingName)
		expectError(put(map[string]any{"name": "/e/x", "type": "value", "value": "v", "extra": 1}), 400,
			"The request includes an unrecognized parameter 'extra'. Please update or remove this parameter and retry your request.")
		expectError(put(map[string]any{"name": "/e/x", "type": "value", "value": "v", "mode": "overwrite", "overwrite": true}), 400, credhub.OverwriteAndModeBoth)
		expectError(post(map[string]any{"name": "/e/x", "type": "password", "mode": "sometimes"}), 400, credhub.InvalidMode)
		expectError(post(map[string]any{"name": "/e/x", "type": "password", "mode": "overwrite", "overwrite": false}), 400, credhub.OverwriteAndModeBoth)
		expectError(post(map[string]any{"name": "/e/x", "type": "value"}), 400, credhub.CannotGenerateType)
		expectError(post(map[string]any{"name": "/e/x", "type": "bogus"}), 400, credhub.InvalidTypeGenerate)
		expectError(post(map[string]any{"name": "/e/x", "type": "password", "parameters": map[string]any{
			"exclude_upper": true, "exclude_lower": true, "exclude_number": true}}), 400, credhub.ExcludesAllCharsets)
		expectError(post(map[string]any{"name": "/e/x", "type": "rsa", "parameters": map[string]any{"key_length": 1024}}), 400, credhub.InvalidKeyLength)
		expectError(post(map[string]any{"name": "/e/x", "type": "certificate", "parameters": map[string]any{"common_name": "x"}}), 400, credhub.MissingSigningCA)
		expectError(post(map[string]any{"name": "/e/x", "type": "certificate", "parameters": map[string]any{"common_name": "x", "ca": "/e/no-ca"}}), 404, credhub.CANotFound)
		expectError(post(map[string]any{"name": "/e/x", "type": "certificate", "parameters": map[string]any{"is_ca": true, "common_name": "x", "key_usage": []string{"bogus"}}}), 400,
			"The provided key usage 'bogus' is not supported. Valid values include 'digital_signature', 'non_repudiation', 'key_encipherment', 'data_encipherment', 'key_agreement', 'key_cert_sign', 'crl_sign', 'encipher_only' and 'decipher_only'.")

		Expect(put(map[string]any{"name": "/e/typed", "type": "value", "value": "v"}).status).To(Equal(200))
		expectError(put(map[string]any{"name": "/e/typed", "type": "password", "value": "v"}), 400, credhub.TypeMismatch)
		expectError(post(map[string]any{"name": "/e/typed", "type": "password"}), 400, credhub.TypeMismatch)

		a := call(server.url, http.MethodDelete, "/api/v1/data?name=/e/typed", token, nil)
		Expect(a.status).To(Equal(http.StatusNoContent))
		Expect(a.body).To(BeEmpty())
		expectError(call(server.url, http.MethodDelete, "/api/v1/data?name=/e/typed", token, nil), 404, credhub.ResourceNotFound)
		expectError(get("/api/v1/data?name=/e/typed"), 404, credhub.ResourceNotFound)
	})

	It("generates with no-overwrite, overwrite, converge and the legacy overwrite", func() {
		gen := func(extra map[string]any) map[string]any {
			GinkgoHelper()
			body := map[string]any{"name": "/modes/pw", "type": "password", "parameters": map[string]any{"length": 40}}
			for k, v := range extra {
				body[k] = v
			}
			a := post(body)
			Expect(a.status).To(Equal(http.StatusOK), a.body)
			return a.json()
		}
		first := gen(nil)
		Expect(first["value"]).To(HaveLen(40))
		Expect(first).To(HaveKeyWithValue("type", "password"))
		Expect(gen(map[string]any{"mode": "no-overwrite"})["id"]).To(Equal(first["id"]))
		Expect(gen(map[string]any{"overwrite": false})["id"]).To(Equal(first["id"]))
		// Converge (and no mode) keeps a value whose parameters match…
		Expect(gen(map[string]any{"mode": "converge"})["id"]).To(Equal(first["id"]))
		Expect(gen(nil)["id"]).To(Equal(first["id"]))
		// …and writes one when they changed.
		changed := post(map[string]any{"name": "/modes/pw", "type": "password", "mode": "converge", "parameters": map[string]any{"length": 12}}).json()
		Expect(changed["id"]).NotTo(Equal(first["id"]))
		Expect(changed["value"]).To(HaveLen(12))
		overwritten := gen(map[string]any{"mode": "overwrite"})
		Expect(overwritten["id"]).NotTo(BeElementOf(first["id"], changed["id"]))
		Expect(gen(map[string]any{"overwrite": true})["id"]).NotTo(Equal(overwritten["id"]))
		Expect(get("/api/v1/data?name=/modes/pw").json()["data"]).To(HaveLen(4))

		// A password set by hand has no parameters: converge replaces it,
		// no-overwrite keeps it (CredHub's matchesGenerationParameters).
		set := put(map[string]any{"name": "/modes/set", "type": "password", "value": "by-hand"}).json()
		Expect(post(map[string]any{"name": "/modes/set", "type": "password", "mode": "no-overwrite"}).json()["id"]).To(Equal(set["id"]))
		Expect(post(map[string]any{"name": "/modes/set", "type": "password", "mode": "converge"}).json()["id"]).NotTo(Equal(set["id"]))

		// Set's converge writes only a different value.
		v := put(map[string]any{"name": "/modes/value", "type": "value", "value": "a"}).json()
		Expect(put(map[string]any{"name": "/modes/value", "type": "value", "value": "a", "mode": "converge"}).json()["id"]).To(Equal(v["id"]))
		Expect(put(map[string]any{"name": "/modes/value", "type": "value", "value": "b", "mode": "no-overwrite"}).json()["value"]).To(Equal("a"))
		Expect(put(map[string]any{"name": "/modes/value", "type": "value", "value": "b", "mode": "converge"}).json()["value"]).To(Equal("b"))
	})

	It("generates users, RSA and SSH keys and regenerates them", func() {
		user := post(map[string]any{"name": "/gen/user", "type": "user", "parameters": map[string]any{"length": 20}}).json()
		u := user["value"].(map[string]any)
		Expect(u["username"]).To(MatchRegexp(`^[A-Za-z]{20}$`))
		Expect(u["password"]).To(HaveLen(20))
		named := post(map[string]any{"name": "/gen/named", "type": "user", "value": map[string]any{"username": "admin"}}).json()
		Expect(named["value"].(map[string]any)["username"]).To(Equal("admin"))

		rsaKey := post(map[string]any{"name": "/gen/rsa", "type": "rsa", "parameters": map[string]any{"key_length": 3072}}).json()
		Expect(rsaKey["value"].(map[string]any)["public_key"]).To(HavePrefix("-----BEGIN PUBLIC KEY-----"))
		Expect(rsaKey["value"].(map[string]any)["private_key"]).To(HavePrefix("-----BEGIN RSA PRIVATE KEY-----"))
		Expect(post(map[string]any{"name": "/gen/rsa", "type": "rsa", "parameters": map[string]any{"key_length": 3072}}).json()["id"]).To(Equal(rsaKey["id"]))

		ssh := post(map[string]any{"name": "/gen/ssh", "type": "ssh", "parameters": map[string]any{"ssh_comment": "me@here"}}).json()
		sv := ssh["value"].(map[string]any)
		Expect(sv).To(HaveKey("public_key_fingerprint"))
		Expect(sv["public_key"]).To(MatchRegexp(`^ssh-rsa \S+ me@here$`))
		if keygen := tool("ssh-keygen", "openssh-client"); keygen != "" {
			f := filepath.Join(GinkgoT().TempDir(), "id.pub")
			Expect(os.WriteFile(f, []byte(sv["public_key"].(string)+"\n"), 0o600)).To(Succeed())
			out, err := exec.Command(keygen, "-lf", f).CombinedOutput()
			Expect(err).NotTo(HaveOccurred(), string(out))
			Expect(strings.TrimSpace(string(out))).To(Equal("2048 SHA256:" + sv["public_key_fingerprint"].(string) + " me@here (RSA)"))
		}

		for _, name := range []string{"/gen/user", "/gen/rsa", "/gen/ssh"} {
			before := get("/api/v1/data?name=" + name + "&current=true").json()["data"].([]any)[0].(map[string]any)
			a := call(server.url, http.MethodPost, "/api/v1/regenerate", token, map[string]any{"name": name})
			Expect(a.status).To(Equal(http.StatusOK), a.body)
			after := a.json()
			Expect(after["id"]).NotTo(Equal(before["id"]))
			Expect(after["value"]).NotTo(Equal(before["value"]))
			if name == "/gen/user" {
				Expect(after["value"].(map[string]any)["username"]).To(Equal(u["username"]))
			}
		}
		a := post(map[string]any{"name": "/gen/rsa", "regenerate": true})
		Expect(a.status).To(Equal(http.StatusOK), a.body)
		Expect(get("/api/v1/data?name=/gen/rsa").json()["data"]).To(HaveLen(3))

		Expect(put(map[string]any{"name": "/gen/by-hand", "type": "password", "value": "x"}).status).To(Equal(200))
		expectError(call(server.url, http.MethodPost, "/api/v1/regenerate", token, map[string]any{"name": "/gen/by-hand"}), 400, credhub.CannotRegeneratePassword)
		expectError(call(server.url, http.MethodPost, "/api/v1/regenerate", token, map[string]any{"name": "/gen/none"}), 404, credhub.ResourceNotFound)
	})

	It("signs certificates with a stored CA, verifiable by openssl, and re-signs on converge after the CA changed", func() {
		ca := post(map[string]any{"name": "/certs/ca", "type": "certificate", "parameters": map[string]any{"common_name": "ca", "is_ca": true}}).json()
		Expect(ca).To(HaveKeyWithValue("certificate_authority", true))
		Expect(ca).To(HaveKeyWithValue("self_signed", true))
		Expect(ca).To(HaveKeyWithValue("generated", true))
		Expect(ca).To(HaveKeyWithValue("transitional", false))
		Expect(ca).To(HaveKeyWithValue("expiry_date", MatchRegexp(instantPattern)))
		caValue := ca["value"].(map[string]any)
		Expect(caValue["ca"]).To(Equal(caValue["certificate"]))

		params := map[string]any{"common_name": "server", "ca": "certs/ca", "alternative_names": []string{"server.example", "10.1.2.3"},
			"extended_key_usage": []string{"server_auth"}, "key_usage": []string{"digital_signature", "key_encipherment"}, "duration": 30}
		leaf := post(map[string]any{"name": "/certs/leaf", "type": "certificate", "parameters": params}).json()
		lv := leaf["value"].(map[string]any)
		Expect(lv["ca"]).To(Equal(caValue["certificate"]))
		Expect(leaf).To(HaveKeyWithValue("self_signed", false))
		openSSLVerify(lv["ca"].(string), lv["certificate"].(string))

		// Same parameters: converge keeps it.
		Expect(post(map[string]any{"name": "/certs/leaf", "type": "certificate", "parameters": params}).json()["id"]).To(Equal(leaf["id"]))
		// The CA regenerated: converge re-signs with the new CA.
		newCA := call(server.url, http.MethodPost, "/api/v1/regenerate", token, map[string]any{"name": "/certs/ca"}).json()
		resigned := post(map[string]any{"name": "/certs/leaf", "type": "certificate", "parameters": params}).json()
		Expect(resigned["id"]).NotTo(Equal(leaf["id"]))
		rv := resigned["value"].(map[string]any)
		Expect(rv["ca"]).To(Equal(newCA["value"].(map[string]any)["certificate"]))
		openSSLVerify(rv["ca"].(string), rv["certificate"].(string))

		certsAnswer := get("/api/v1/certificates?name=/certs/ca")
		Expect(certsAnswer.status).To(Equal(http.StatusOK), certsAnswer.body)
		list := certsAnswer.json()["certificates"].([]any)
		Expect(list).To(HaveLen(1))
		c := list[0].(map[string]any)
		Expect(c).To(HaveKeyWithValue("name", "/certs/ca"))
		Expect(c).To(HaveKeyWithValue("id", MatchRegexp(uuidPattern)))
		Expect(c).To(HaveKeyWithValue("signed_by", "/certs/ca"))
		Expect(c).To(HaveKeyWithValue("signs", []any{"/certs/leaf"}))
		Expect(c["versions"]).To(HaveLen(2))
		Expect(c["versions"].([]any)[0]).To(Equal(map[string]any{"id": newCA["id"], "expiry_date": newCA["expiry_date"],
			"transitional": false, "certificate_authority": true, "self_signed": true, "generated": true}))
		expectError(get("/api/v1/certificates?name=/certs/none"), 404, credhub.ResourceNotFound)

		// A certificate set by hand with ca_name takes the CA's certificate.
		set := put(map[string]any{"name": "/certs/set", "type": "certificate", "value": map[string]any{
			"ca_name": "/certs/ca", "certificate": rv["certificate"], "private_key": rv["private_key"]}})
		Expect(set.status).To(Equal(http.StatusOK), set.body)
		Expect(set.json()["value"].(map[string]any)["ca"]).To(Equal(rv["ca"]))
		Expect(set.json()).To(HaveKeyWithValue("generated", false))
		expectError(put(map[string]any{"name": "/certs/bad", "type": "certificate", "value": map[string]any{"certificate": "junk"}}), 400, credhub.InvalidCertificateValue)

		// CA rotation's bulk step: an intermediate CA and what it signs
		// are regenerated after the root.
		Expect(post(map[string]any{"name": "/certs/intermediate", "type": "certificate", "parameters": map[string]any{"common_name": "int", "is_ca": true, "ca": "/certs/ca"}}).status).To(Equal(200))
		Expect(post(map[string]any{"name": "/certs/deep", "type": "certificate", "parameters": map[string]any{"common_name": "deep", "ca": "/certs/intermediate"}}).status).To(Equal(200))
		call(server.url, http.MethodPost, "/api/v1/regenerate", token, map[string]any{"name": "/certs/ca"})
		bulk := call(server.url, http.MethodPost, "/api/v1/bulk-regenerate", token, map[string]any{"signed_by": "/certs/ca"})
		Expect(bulk.status).To(Equal(http.StatusOK), bulk.body)
		Expect(bulk.json()).To(Equal(map[string]any{"regenerated_credentials": []any{"/certs/deep", "/certs/intermediate", "/certs/leaf", "/certs/set"}}))
		current := func(name string) map[string]any {
			return get("/api/v1/data?current=true&name=" + name).json()["data"].([]any)[0].(map[string]any)["value"].(map[string]any)
		}
		root, intermediate, deep := current("/certs/ca"), current("/certs/intermediate"), current("/certs/deep")
		Expect(intermediate["ca"]).To(Equal(root["certificate"]))
		openSSLVerify(root["certificate"].(string), intermediate["certificate"].(string))
		Expect(deep["ca"]).To(Equal(intermediate["certificate"]))
		openSSLVerify(intermediate["certificate"].(string)+root["certificate"].(string), deep["certificate"].(string))
		expectError(call(server.url, http.MethodPost, "/api/v1/bulk-regenerate", token, map[string]any{}), 400, credhub.MissingSignedBy)
	})

	It("treats names case-insensitively, as CredHub, keeping the first spelling", func() {
		first := put(map[string]any{"name": "/Case/Mixed", "type": "value", "value": "a"}).json()
		second := put(map[string]any{"name": "/case/MIXED", "type": "value", "value": "b"}).json()
		Expect(second["name"]).To(Equal("/Case/Mixed"))
		all := get("/api/v1/data?name=/CASE/mixed").json()["data"].([]any)
		Expect(all).To(HaveLen(2))
		Expect(all[1].(map[string]any)["id"]).To(Equal(first["id"]))
		Expect(call(server.url, http.MethodDelete, "/api/v1/data?name=/case/mixed", token, nil).status).To(Equal(http.StatusNoContent))
		expectError(get("/api/v1/data?name=/Case/Mixed"), 404, credhub.ResourceNotFound)
	})

	It("finds credentials by path and by name-like, newest first", func() {
		for _, n := range []string{"/find/a/one", "/find/a/two", "/find/b/three", "/finder/x"} {
			Expect(put(map[string]any{"name": n, "type": "value", "value": "v"}).status).To(Equal(200))
		}
		names := func(a answer) []string {
			GinkgoHelper()
			Expect(a.status).To(Equal(http.StatusOK), a.body)
			var out []string
			for _, c := range a.json()["credentials"].([]any) {
				Expect(c).To(HaveKeyWithValue("version_created_at", MatchRegexp(instantPattern)))
				out = append(out, c.(map[string]any)["name"].(string))
			}
			return out
		}
		Expect(names(get("/api/v1/data?path=/find/"))).To(ConsistOf("/find/a/one", "/find/a/two", "/find/b/three"))
		Expect(names(get("/api/v1/data?path=/find/a"))).To(ConsistOf("/find/a/one", "/find/a/two"))
		Expect(names(get("/api/v1/data?name-like=FIND/B"))).To(ConsistOf("/find/b/three"))
		Expect(get("/api/v1/data?path=/nothing/").json()).To(Equal(map[string]any{"credentials": []any{}}))
	})
})

// openSSLVerify checks a certificate against its CA with openssl.
func openSSLVerify(ca, cert string) {
	GinkgoHelper()
	openssl := tool("openssl", "openssl")
	if openssl == "" {
		return
	}
	dir := GinkgoT().TempDir()
	Expect(os.WriteFile(filepath.Join(dir, "ca.pem"), []byte(ca), 0o600)).To(Succeed())
	Expect(os.WriteFile(filepath.Join(dir, "cert.pem"), []byte(cert), 0o600)).To(Succeed())
	out, err := exec.Command(openssl, "verify", "-CAfile", filepath.Join(dir, "ca.pem"), filepath.Join(dir, "cert.pem")).CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), string(out))
	Expect(string(out)).To(ContainSubstring(": OK"))
}

// tool finds an independent checker; when the machine lacks it, the spec
// says so in its report and goes on without that check.
func tool(name, debianPackage string) string {
	p, err := exec.LookPath(name)
	if err != nil {
		AddReportEntry("skipped check", name+" is not installed (Debian package "+debianPackage+"); the check against it is skipped")
		return ""
	}
	return p
}
