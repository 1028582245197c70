package configserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/zapr"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bosh-injector/bosh-injector/cmd/bosh-injector/app"
	"github.com/bosh-injector/bosh-injector/gather/configserver"
	"github.com/bosh-injector/bosh-injector/gather/configserver/auth"
	"github.com/bosh-injector/bosh-injector/gather/configserver/director"
	"github.com/bosh-injector/bosh-injector/test/controlplane"
	"github.com/bosh-injector/bosh-injector/test/fixtures"
)

// runCommandEnv, set in a child's environment, makes this test binary the
// bosh-injector command with the child's arguments, so a spec runs
// `bosh-injector config-server` as a process.
const runCommandEnv = "CONFIGSERVER_TEST_RUN_COMMAND"

func TestMain(m *testing.M) {
	if os.Getenv(runCommandEnv) != "" {
		os.Exit(app.Main(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

func TestConfigServer(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Config server")
}

const (
	namespace    = "config-server"
	directorName = "my-bosh"
	clientName   = "director"
	// clientSecret has characters that client_secret_basic must
	// form-encode with X-CF-ENCODED-CREDENTIALS.
	clientSecret = "s3cr3t+with:colon&amp=x"
	readerName   = "reader"
	readerSecret = "reader-secret-value"
)

var (
	cp    *controlplane.ControlPlane
	ctx   = context.Background()
	certs *serving
	// logs collects the servers' logs for the secrecy checks.
	logs   = &fixtures.SyncBuffer{}
	server *running
)

// The control plane is etcd and kube-apiserver, whose ServiceAccount
// issuer signs the projected tokens the TokenReviews check.
var _ = BeforeSuite(func() {
	cp = controlplane.StartForSuite(controlplane.Options{})
	Expect(cp.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}})).To(Succeed())
	for name, data := range map[string]map[string][]byte{
		"director-client": {"secret": []byte(clientSecret)},
		"reader-client":   {"secret": []byte(readerSecret), "scopes": []byte(auth.ScopeRead)},
	} {
		Expect(cp.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Data: data})).To(Succeed())
	}
	certs = newServing()
	server = start()
	// The restart spec replaces server: stop whichever runs at the end.
	DeferCleanup(func() { server.stop() })
})

var _ = AfterEach(func() { cp.LogsOnFailure() })

func options() configserver.Options {
	return configserver.Options{
		Namespace: namespace, Directors: director.Directors{Default: directorName}, Audience: director.Audience,
		Clients:          []auth.Client{{Name: clientName, SecretName: "director-client"}, {Name: readerName, SecretName: "reader-client"}},
		SigningKeySecret: "token-key", CertDir: certs.Dir,
	}
}

// running is a server started in the test process, as the config-server
// command starts it.
type running struct {
	*fixtures.ConfigServer
	url     string
	stopped sync.Once
}

// start runs a server on a free port and waits until it answers; the
// caller stops it.
func start() *running {
	GinkgoHelper()
	log := zapr.NewLogger(zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(io.MultiWriter(GinkgoWriter, logs)), zapcore.DebugLevel)))
	s, err := fixtures.StartConfigServer(ctx, cp.Config, options(), certs, log)
	Expect(err).NotTo(HaveOccurred())
	return &running{ConfigServer: s, url: s.URL}
}

func (r *running) stop() {
	r.stopped.Do(func() { Expect(r.Stop()).To(Succeed()) })
}

// serving is the serving certificate in a cert dir, and an HTTP client
// trusting it.
type serving = fixtures.Serving

func newServing() *serving {
	GinkgoHelper()
	s, err := fixtures.NewServing(GinkgoT().TempDir())
	Expect(err).NotTo(HaveOccurred())
	return s
}

// answer is an HTTP answer: status and body.
type answer struct {
	status int
	body   string
	header http.Header
}

// json decodes the body.
func (a answer) json() map[string]any {
	GinkgoHelper()
	var m map[string]any
	Expect(json.Unmarshal([]byte(a.body), &m)).To(Succeed(), a.body)
	return m
}

// decode decodes the body into v (an answer that is not an object).
func (a answer) decode(v any) error { return json.Unmarshal([]byte(a.body), v) }

// call makes a request to base with a bearer token (none when empty) and
// a JSON body (none when nil).
func call(base, method, path, token string, body any) answer {
	GinkgoHelper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		Expect(err).NotTo(HaveOccurred())
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, base+path, rd)
	Expect(err).NotTo(HaveOccurred())
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := certs.Client.Do(req)
	Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	Expect(err).NotTo(HaveOccurred())
	return answer{status: resp.StatusCode, body: string(b), header: resp.Header}
}

// tokenFor gets a client_credentials token the way the director's UAA
// client does (client_secret_basic with encoded credentials).
func tokenFor(base, name, secret string) string {
	GinkgoHelper()
	a := tokenRequest(base, name, secret, "basic-encoded")
	Expect(a.status).To(Equal(http.StatusOK), a.body)
	return a.json()["access_token"].(string)
}

// tokenRequest asks /oauth/token in one of the client authentication
// styles: "basic", "basic-encoded" (X-CF-ENCODED-CREDENTIALS: true) or
// "post" (client_secret_post).
func tokenRequest(base, name, secret, style string) answer {
	GinkgoHelper()
	form := url.Values{"grant_type": {"client_credentials"}}
	if style == "post" {
		form.Set("client_id", name)
		form.Set("client_secret", secret)
	}
	req, err := http.NewRequest(http.MethodPost, base+"/oauth/token", strings.NewReader(form.Encode()))
	Expect(err).NotTo(HaveOccurred())
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	switch style {
	case "basic":
		req.SetBasicAuth(name, secret)
	case "basic-encoded":
		req.SetBasicAuth(url.QueryEscape(name), url.QueryEscape(secret))
		req.Header.Set("X-CF-ENCODED-CREDENTIALS", "true")
	}
	resp, err := certs.Client.Do(req)
	Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{status: resp.StatusCode, body: string(b), header: resp.Header}
}
