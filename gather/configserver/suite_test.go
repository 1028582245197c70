package configserver_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

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
		Namespace: namespace, Director: directorName, Audience: director.Audience,
		Clients:          []auth.Client{{Name: clientName, SecretName: "director-client"}, {Name: readerName, SecretName: "reader-client"}},
		SigningKeySecret: "token-key", CertDir: certs.dir, Address: "127.0.0.1:0",
	}
}

// running is a server started in the test process, as the config-server
// command starts it.
type running struct {
	url     string
	cancel  context.CancelFunc
	done    chan error
	stopped sync.Once
}

// start runs a server on a free port and waits until it answers; the
// caller stops it.
func start() *running {
	port := freePort()
	o := options()
	o.Address = fmt.Sprintf("127.0.0.1:%d", port)
	runCtx, cancel := context.WithCancel(ctx)
	r := &running{url: fmt.Sprintf("https://127.0.0.1:%d", port), cancel: cancel, done: make(chan error, 1)}
	log := zapr.NewLogger(zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(io.MultiWriter(GinkgoWriter, logs)), zapcore.DebugLevel)))
	go func() { r.done <- configserver.Run(runCtx, cp.Config, o, log) }()
	Eventually(func() error {
		resp, err := certs.client.Get(r.url + "/health")
		if err == nil {
			resp.Body.Close()
		}
		return err
	}).Should(Succeed())
	return r
}

func (r *running) stop() {
	r.stopped.Do(func() {
		r.cancel()
		Eventually(r.done, 15*time.Second).Should(Receive(BeNil()))
	})
}

func freePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// serving is the serving certificate in a cert dir, and an HTTP client
// trusting it.
type serving struct {
	dir    string
	caPEM  []byte
	client *http.Client
}

func newServing() *serving {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	Expect(err).NotTo(HaveOccurred())
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "config-server"},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	Expect(err).NotTo(HaveOccurred())
	s := &serving{dir: GinkgoT().TempDir(), caPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
	Expect(os.WriteFile(filepath.Join(s.dir, "tls.crt"), s.caPEM, 0o600)).To(Succeed())
	Expect(os.WriteFile(filepath.Join(s.dir, "tls.key"), pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600)).To(Succeed())
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(s.caPEM)
	s.client = &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, MaxIdleConnsPerHost: 64}}
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
	resp, err := certs.client.Do(req)
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
	resp, err := certs.client.Do(req)
	Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{status: resp.StatusCode, body: string(b), header: resp.Header}
}
