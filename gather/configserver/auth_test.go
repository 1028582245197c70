package configserver_test

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"math/big"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bosh-injector/bosh-injector/gather/configserver/auth"
	"github.com/bosh-injector/bosh-injector/gather/configserver/credhub"
	"github.com/bosh-injector/bosh-injector/gather/configserver/director"
	"github.com/bosh-injector/bosh-injector/gather/names"
)

var _ = Describe("OAuth clients", func() {
	It("issues tokens for client_secret_basic with and without X-CF-ENCODED-CREDENTIALS and for client_secret_post", func() {
		for _, style := range []string{"basic", "basic-encoded", "post"} {
			a := tokenRequest(server.url, clientName, clientSecret, style)
			Expect(a.status).To(Equal(http.StatusOK), style+": "+a.body)
			body := a.json()
			Expect(body).To(HaveKeyWithValue("token_type", "bearer"))
			Expect(body).To(HaveKeyWithValue("scope", "credhub.read credhub.write"))
			Expect(body).To(HaveKeyWithValue("expires_in", BeNumerically(">", 3500)))
			Expect(body).To(HaveKeyWithValue("jti", MatchRegexp(uuidPattern)))
			Expect(call(server.url, http.MethodGet, "/api/v1/data?path=/", body["access_token"].(string), nil).status).To(Equal(http.StatusOK))
		}
		for _, style := range []string{"basic", "basic-encoded", "post"} {
			a := tokenRequest(server.url, clientName, "wrong", style)
			Expect(a.status).To(Equal(http.StatusUnauthorized), style)
			Expect(a.json()).To(Equal(map[string]any{"error": "unauthorized", "error_description": "Bad credentials"}))
		}
		Expect(tokenRequest(server.url, "nobody", clientSecret, "basic").status).To(Equal(http.StatusUnauthorized))
		a := tokenRequest(server.url, clientName, clientSecret, "post")
		Expect(a.status).To(Equal(http.StatusOK))
		// credhub logout revokes its token by jti.
		token, jti := a.json()["access_token"].(string), a.json()["jti"].(string)
		Expect(call(server.url, http.MethodDelete, "/oauth/token/revoke/"+jti, token, nil).status).To(Equal(http.StatusOK))
		Expect(call(server.url, http.MethodDelete, "/oauth/token/revoke/other", token, nil).status).To(Equal(http.StatusUnauthorized))
	})

	It("signs RS256 JWTs that verify with the key /token_keys publishes, in UAA's JWKS shape", func() {
		token := tokenFor(server.url, clientName, clientSecret)
		keys := call(server.url, http.MethodGet, "/token_keys", "", nil)
		Expect(keys.status).To(Equal(http.StatusOK))
		set := keys.json()["keys"].([]any)
		Expect(set).To(HaveLen(1))
		jwk := set[0].(map[string]any)
		Expect(jwk).To(HaveKeyWithValue("kty", "RSA"))
		Expect(jwk).To(HaveKeyWithValue("alg", "RS256"))
		Expect(jwk).To(HaveKeyWithValue("use", "sig"))
		Expect(jwk).To(HaveKeyWithValue("e", "AQAB"))
		Expect(jwk).To(HaveKeyWithValue("value", HavePrefix("-----BEGIN PUBLIC KEY-----")))
		single := call(server.url, http.MethodGet, "/token_key", "", nil).json()
		Expect(single).To(Equal(jwk))

		// From n and e alone, as a JWKS consumer builds the key.
		n, err := base64.RawURLEncoding.DecodeString(jwk["n"].(string))
		Expect(err).NotTo(HaveOccurred())
		pub := &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: 65537}
		var claims jwt.MapClaims
		parsed, err := jwt.ParseWithClaims(token, &claims, func(t *jwt.Token) (any, error) {
			Expect(t.Header["kid"]).To(Equal(jwk["kid"]))
			return pub, nil
		}, jwt.WithValidMethods([]string{"RS256"}), jwt.WithAudience("credhub"))
		Expect(err).NotTo(HaveOccurred())
		Expect(parsed.Valid).To(BeTrue())
		Expect(claims).To(HaveKeyWithValue("client_id", clientName))
		Expect(claims).To(HaveKeyWithValue("grant_type", "client_credentials"))
		Expect(claims).To(HaveKeyWithValue("scope", ConsistOf("credhub.read", "credhub.write")))
		Expect(claims).To(HaveKeyWithValue("iss", server.url+"/oauth/token"))

		// And independently: Debian's ruby-jwt with the JWKS as fetched.
		ruby := tool("ruby", "ruby")
		if ruby == "" {
			return
		}
		if out, err := exec.Command(ruby, "-rjwt", "-e", "").CombinedOutput(); err != nil {
			AddReportEntry("skipped check", "ruby-jwt is not installed (Debian package ruby-jwt); the token is not checked against /token_keys with it: "+string(out))
			return
		}
		dir := GinkgoT().TempDir()
		Expect(os.WriteFile(filepath.Join(dir, "jwks.json"), []byte(keys.body), 0o600)).To(Succeed())
		Expect(os.WriteFile(filepath.Join(dir, "token"), []byte(token), 0o600)).To(Succeed())
		script := `require "jwt"; require "json"
jwks = JSON.parse(File.read(ARGV[0]), symbolize_names: true)
payload, header = JWT.decode(File.read(ARGV[1]), nil, true, algorithms: ["RS256"], jwks: jwks, aud: "credhub", verify_aud: true)
puts payload["client_id"]`
		out, err := exec.Command(ruby, "-e", script, filepath.Join(dir, "jwks.json"), filepath.Join(dir, "token")).CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), "ruby-jwt does not verify the token with /token_keys: %s", out)
		Expect(strings.TrimSpace(string(out))).To(Equal(clientName))
		// A token signed by another key fails there too.
		other, err := rsa.GenerateKey(rand.Reader, 2048)
		Expect(err).NotTo(HaveOccurred())
		forged := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.MapClaims{"aud": "credhub", "client_id": clientName})
		forged.Header["kid"] = jwk["kid"]
		forgedToken, err := forged.SignedString(other)
		Expect(err).NotTo(HaveOccurred())
		Expect(os.WriteFile(filepath.Join(dir, "token"), []byte(forgedToken), 0o600)).To(Succeed())
		out, err = exec.Command(ruby, "-e", script, filepath.Join(dir, "jwks.json"), filepath.Join(dir, "token")).CombinedOutput()
		Expect(err).To(HaveOccurred(), "ruby-jwt accepts a forged token: %s", out)
		Expect(string(out)).To(ContainSubstring("Signature verification failed"))
	})

	It("answers 401 with a JSON body for a missing, malformed, forged or expired token", func() {
		expect401 := func(token, code, description string) {
			GinkgoHelper()
			a := call(server.url, http.MethodGet, "/api/v1/data?name=/x", token, nil)
			Expect(a.status).To(Equal(http.StatusUnauthorized), a.body)
			Expect(a.json()).To(Equal(map[string]any{"error": code, "error_description": description}))
			Expect(a.header.Get("WWW-Authenticate")).To(HavePrefix("Bearer "))
		}
		expect401("", "access_denied", "Full authentication is required to access this resource")
		expect401("not-a-jwt", "invalid_token", credhub.MalformedToken)

		// Tokens naming the server's key id: one signed with another key,
		// one signed with the server's own key (read from its Secret) but
		// expired.
		kid := call(server.url, http.MethodGet, "/token_key", "", nil).json()["kid"].(string)
		sign := func(key *rsa.PrivateKey, exp time.Time) string {
			t := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.MapClaims{"aud": []string{"credhub"}, "exp": exp.Unix(),
				"iat": time.Now().Add(-2 * time.Hour).Unix(), "client_id": clientName, "scope": []string{"credhub.read"}})
			t.Header["kid"] = kid
			s, err := t.SignedString(key)
			Expect(err).NotTo(HaveOccurred())
			return s
		}
		other, err := rsa.GenerateKey(rand.Reader, 2048)
		Expect(err).NotTo(HaveOccurred())
		expect401(sign(other, time.Now().Add(time.Hour)), "invalid_token", credhub.InvalidTokenSignature)
		var keySecret corev1.Secret
		Expect(cp.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "token-key"}, &keySecret)).To(Succeed())
		block, _ := pem.Decode(keySecret.Data["tls.key"])
		own, err := x509.ParsePKCS1PrivateKey(block.Bytes)
		Expect(err).NotTo(HaveOccurred())
		expect401(sign(own, time.Now().Add(-time.Minute)), "access_token_expired", "Access token expired")
		Expect(call(server.url, http.MethodGet, "/api/v1/data?path=/", sign(own, time.Now().Add(time.Minute)), nil).status).To(Equal(http.StatusOK))
	})

	It("enforces credhub.read and credhub.write", func() {
		writer := tokenFor(server.url, clientName, clientSecret)
		reader := tokenFor(server.url, readerName, readerSecret)
		Expect(call(server.url, http.MethodPut, "/api/v1/data", writer, map[string]any{"name": "/scopes/x", "type": "value", "value": "v"}).status).To(Equal(200))
		Expect(call(server.url, http.MethodGet, "/api/v1/data?name=/scopes/x", reader, nil).status).To(Equal(200))
		for _, method := range []string{http.MethodPut, http.MethodPost} {
			a := call(server.url, method, "/api/v1/data", reader, map[string]any{"name": "/scopes/x", "type": "password"})
			Expect(a.status).To(Equal(http.StatusForbidden), a.body)
			Expect(a.json()).To(HaveKeyWithValue("error", "insufficient_scope"))
		}
		Expect(call(server.url, http.MethodDelete, "/api/v1/data?name=/scopes/x", reader, nil).status).To(Equal(http.StatusForbidden))
	})
})

var _ = Describe("gathering Jobs' ServiceAccount tokens", func() {
	const team = "team"
	var admin string

	// serviceAccount creates a ServiceAccount and returns a projected
	// token of it for audience.
	serviceAccount := func(name string, labels, annotations map[string]string, audience string) string {
		GinkgoHelper()
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: team, Name: name, Labels: labels, Annotations: annotations}}
		Expect(client.IgnoreAlreadyExists(cp.Client.Create(ctx, sa))).To(Succeed())
		tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{Audiences: []string{audience}, ExpirationSeconds: ptr.To[int64](600)}}
		Expect(cp.Client.SubResource("token").Create(ctx, sa, tr)).To(Succeed())
		return tr.Status.Token
	}
	gatherSA := func(deployment string) (map[string]string, map[string]string) {
		return map[string]string{names.LabelManagedBy: names.ManagedBy},
			map[string]string{director.AnnotationDeployment: deployment, director.AnnotationGrants: `["/shared/cert"]`}
	}

	BeforeEach(func() {
		Expect(client.IgnoreAlreadyExists(cp.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: team}}))).To(Succeed())
		admin = tokenFor(server.url, clientName, clientSecret)
		for _, n := range []string{"/my-bosh/shop/password", "/my-bosh/other/password", "/shared/cert", "/shared/secret"} {
			Expect(call(server.url, http.MethodPut, "/api/v1/data", admin, map[string]any{"name": n, "type": "value", "value": "v"}).status).To(Equal(200))
		}
	})

	It("lets a deployment's Job read and write its own names and its grants, and answers CredHub's 404 for any other", func() {
		labels, annotations := gatherSA("shop")
		token := serviceAccount("shop-gather", labels, annotations, director.Audience)

		a := call(server.url, http.MethodGet, "/api/v1/data?name=/my-bosh/shop/password&current=true", token, nil)
		Expect(a.status).To(Equal(http.StatusOK), a.body)
		id := a.json()["data"].([]any)[0].(map[string]any)["id"].(string)
		Expect(call(server.url, http.MethodGet, "/api/v1/data/"+id, token, nil).status).To(Equal(http.StatusOK))
		gen := call(server.url, http.MethodPost, "/api/v1/data", token, map[string]any{"name": "/my-bosh/shop/new", "type": "password"})
		Expect(gen.status).To(Equal(http.StatusOK), gen.body)
		Expect(call(server.url, http.MethodGet, "/api/v1/data?name=/shared/cert", token, nil).status).To(Equal(http.StatusOK))

		// Names are case-insensitive: another deployment's /my-bosh/SHOP/
		// is not this one's, whatever case the Job asks in.
		Expect(call(server.url, http.MethodPut, "/api/v1/data", admin, map[string]any{"name": "/my-bosh/SHOP/upper", "type": "value", "value": "v"}).status).To(Equal(200))
		Expect(call(server.url, http.MethodGet, "/api/v1/data?name=/my-bosh/shop/upper", token, nil).status).To(Equal(http.StatusNotFound))
		Expect(call(server.url, http.MethodPut, "/api/v1/data", token, map[string]any{"name": "/my-bosh/shop/upper", "type": "value", "value": "x"}).status).To(Equal(http.StatusNotFound))
		Expect(call(server.url, http.MethodDelete, "/api/v1/data?name=/my-bosh/shop/upper", token, nil).status).To(Equal(http.StatusNotFound))

		otherID := call(server.url, http.MethodGet, "/api/v1/data?name=/my-bosh/other/password", admin, nil).json()["data"].([]any)[0].(map[string]any)["id"].(string)
		for _, refused := range []answer{
			call(server.url, http.MethodGet, "/api/v1/data?name=/my-bosh/other/password", token, nil),
			call(server.url, http.MethodGet, "/api/v1/data/"+otherID, token, nil),
			call(server.url, http.MethodGet, "/api/v1/data?name=/shared/secret", token, nil),
			call(server.url, http.MethodPut, "/api/v1/data", token, map[string]any{"name": "/my-bosh/other/password", "type": "value", "value": "x"}),
			call(server.url, http.MethodPost, "/api/v1/data", token, map[string]any{"name": "/elsewhere", "type": "password"}),
			call(server.url, http.MethodDelete, "/api/v1/data?name=/my-bosh/other/password", token, nil),
		} {
			Expect(refused.status).To(Equal(http.StatusNotFound), refused.body)
			Expect(refused.json()).To(Equal(map[string]any{"error": credhub.ResourceNotFound}))
		}
		// A CA outside the scope is as missing as one that does not exist.
		ca := call(server.url, http.MethodPost, "/api/v1/data", token, map[string]any{"name": "/my-bosh/shop/leaf", "type": "certificate",
			"parameters": map[string]any{"common_name": "x", "ca": "/shared/secret"}})
		Expect(ca.status).To(Equal(http.StatusNotFound))
		Expect(ca.json()).To(Equal(map[string]any{"error": credhub.CANotFound}))
		// Searches show only what the Job may see.
		var found []string
		for _, c := range call(server.url, http.MethodGet, "/api/v1/data?path=/", token, nil).json()["credentials"].([]any) {
			found = append(found, c.(map[string]any)["name"].(string))
		}
		Expect(found).To(ConsistOf("/my-bosh/shop/password", "/my-bosh/shop/new", "/shared/cert"))
	})

	It("refuses tokens of another audience and gives accounts outside the contract nothing", func() {
		labels, annotations := gatherSA("shop")
		wrongAudience := serviceAccount("shop-gather", labels, annotations, "https://kubernetes.default.svc")
		a := call(server.url, http.MethodGet, "/api/v1/data?name=/my-bosh/shop/password", wrongAudience, nil)
		Expect(a.status).To(Equal(http.StatusUnauthorized), a.body)
		Expect(a.json()).To(HaveKeyWithValue("error", "invalid_token"))

		// Not managed by bosh-injector, or named unlike <deployment>-gather:
		// authenticated, but every name is CredHub's 404.
		// Named unlike <deployment>-gather, or not managed by bosh-injector:
		// authenticated, but every name is CredHub's 404.
		_, impostor := gatherSA("impostor")
		for name, token := range map[string]string{
			"shop-gather-2":   serviceAccount("shop-gather-2", labels, annotations, director.Audience),
			"impostor-gather": serviceAccount("impostor-gather", nil, impostor, director.Audience),
		} {
			for _, n := range []string{"/my-bosh/shop/password", "/my-bosh/impostor/x"} {
				a := call(server.url, http.MethodGet, "/api/v1/data?name="+n, token, nil)
				Expect(a.status).To(Equal(http.StatusNotFound), name+": "+a.body)
			}
		}
	})

	It("maps a ServiceAccount to its scope by the contract", func() {
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "a-b-gather", Labels: map[string]string{names.LabelManagedBy: names.ManagedBy},
			Annotations: map[string]string{director.AnnotationDeployment: "a_b", director.AnnotationGrants: `["/g", "relative"]`}}}
		s, ok := auth.ScopeOf("d", sa)
		Expect(ok).To(BeTrue())
		Expect(s).To(Equal(auth.Scope{Prefix: "/d/a_b/", Names: []string{"/g"}}))
		Expect(s.Allows("/d/a_b/x")).To(BeTrue())
		Expect(s.Allows("/d/a-b/x")).To(BeFalse())
		Expect(s.Allows("/d/a_bx")).To(BeFalse())
		Expect(auth.Scope{}.Allows("/d/a_b/x")).To(BeFalse(), "the empty scope allows nothing")
		sa.Annotations[director.AnnotationGrants] = "not json"
		_, ok = auth.ScopeOf("d", sa)
		Expect(ok).To(BeFalse())
	})
})

var _ = Describe("secrecy", func() {
	It("never logs or answers a value, a client secret or a token", func() {
		const planted = "planted-VALUE-8d1f3a" // a value no other spec uses
		token := tokenFor(server.url, clientName, clientSecret)
		Expect(call(server.url, http.MethodPut, "/api/v1/data", token, map[string]any{"name": "/secrecy/x", "type": "password", "value": planted}).status).To(Equal(200))
		var bodies []string
		for _, a := range []answer{
			call(server.url, http.MethodPut, "/api/v1/data", token, map[string]any{"name": "/secrecy/x", "type": "value", "value": planted}),
			call(server.url, http.MethodPut, "/api/v1/data", token, map[string]any{"name": "/secrecy/x", "type": "password", "value": planted, "bogus": planted}),
			call(server.url, http.MethodPut, "/api/v1/data", token, map[string]any{"name": "/secrecy/y", "type": "certificate", "value": map[string]any{"certificate": planted}}),
			call(server.url, http.MethodPost, "/api/v1/data", token, map[string]any{"name": "/secrecy/x", "regenerate": true}),
			tokenRequest(server.url, clientName, planted, "basic"),
			call(server.url, http.MethodGet, "/api/v1/data?name=/secrecy/x", token+"x", nil),
		} {
			Expect(a.status).To(BeNumerically(">=", 400))
			bodies = append(bodies, a.body)
		}
		Expect(strings.Join(bodies, "\n")).NotTo(ContainSubstring(planted))
		Expect(call(server.url, http.MethodGet, "/api/v1/data?name=/secrecy/x", token, nil).body).To(ContainSubstring(planted))

		logged := logs.String()
		Expect(logged).To(ContainSubstring(`"path":"/api/v1/data"`), "the request log is on (debug level)")
		Expect(logged).To(ContainSubstring("token issued"))
		Expect(logged).NotTo(ContainSubstring(planted))
		Expect(logged).NotTo(ContainSubstring(clientSecret))
		Expect(logged).NotTo(ContainSubstring(readerSecret))
		Expect(logged).NotTo(ContainSubstring(token))
		Expect(logged).NotTo(ContainSubstring(strings.Split(token, ".")[2]), "not even a token's signature")
		var sec corev1.Secret
		Expect(cp.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "token-key"}, &sec)).To(Succeed())
		Expect(logged).NotTo(ContainSubstring(strings.Split(string(sec.Data["tls.key"]), "\n")[1]))
	})
})
