package configserver_test

import (
	"crypto/sha256"
	"crypto/tls"
	"encoding/pem"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/bosh-injector/bosh-injector/test/fixtures"
)

var _ = Describe("bosh-injector config-server", func() {
	It("serves over TLS from its cert dir, reloads a renewed certificate, and logs no secret", func() {
		kubeconfig, err := cp.KubeconfigFile("config-server")
		Expect(err).NotTo(HaveOccurred())
		tlsFiles := newServing()
		port, err := fixtures.FreePort()
		Expect(err).NotTo(HaveOccurred())
		base := fmt.Sprintf("https://127.0.0.1:%d", port)
		logFile := filepath.Join(GinkgoT().TempDir(), "config-server.log")
		out, err := os.Create(logFile)
		Expect(err).NotTo(HaveOccurred())
		cmd := exec.Command(os.Args[0], "config-server", "--kubeconfig", kubeconfig, "--namespace", namespace,
			"--director-name", directorName, "--client", clientName+"=director-client", "--signing-key-secret", "token-key",
			"--cert-dir", tlsFiles.Dir, "--listen", fmt.Sprintf("127.0.0.1:%d", port), "--url", "https://config-server.example:8844",
			"--log-level", "debug")
		cmd.Env = append(os.Environ(), runCommandEnv+"=1")
		cmd.Stdout, cmd.Stderr = out, out
		Expect(cmd.Start()).To(Succeed())
		exited := make(chan struct{})
		var exitErr error
		go func() {
			exitErr = cmd.Wait()
			close(exited)
		}()
		DeferCleanup(func() {
			_ = cmd.Process.Signal(syscall.SIGKILL)
			<-exited
		})

		Eventually(func() error {
			resp, err := tlsFiles.Client.Get(base + "/health")
			if err == nil {
				resp.Body.Close()
			}
			return err
		}, 30*time.Second).Should(Succeed())
		saved := certs
		certs = tlsFiles
		DeferCleanup(func() { certs = saved })

		info := call(base, http.MethodGet, "/info", "", nil).json()
		Expect(info["auth-server"]).To(Equal(map[string]any{"url": "https://config-server.example:8844"}))
		token := tokenFor(base, clientName, clientSecret)
		const planted = "command-VALUE-5e0c77"
		Expect(call(base, http.MethodPut, "/api/v1/data", token, map[string]any{"name": "/command/x", "type": "password", "value": planted}).status).To(Equal(http.StatusOK))
		Expect(call(base, http.MethodGet, "/api/v1/data?name=/command/x&current=true", token, nil).body).To(ContainSubstring(planted))
		Expect(call(base, http.MethodGet, "/version", token, nil).json()).To(Equal(map[string]any{"version": "2.15.20"}))
		// The credhub CLI's spelling of the certificates endpoint.
		Expect(call(base, http.MethodGet, "/api/v1/certificates/", token, nil).status).To(Equal(http.StatusOK))

		// A renewed certificate (cert-manager rewrites the Secret's files)
		// is served without a restart.
		servedCert := func() [32]byte {
			conn, err := tls.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port), &tls.Config{InsecureSkipVerify: true}) // only reads which certificate is served
			if err != nil {
				return [32]byte{}
			}
			defer conn.Close()
			return sha256.Sum256(conn.ConnectionState().PeerCertificates[0].Raw)
		}
		before := servedCert()
		Expect(before).To(Equal(sha256.Sum256(pemBlock(tlsFiles.CAPEM))))
		renewed := newServing()
		for _, f := range []string{"tls.crt", "tls.key"} {
			data, err := os.ReadFile(filepath.Join(renewed.Dir, f))
			Expect(err).NotTo(HaveOccurred())
			Expect(os.WriteFile(filepath.Join(tlsFiles.Dir, f), data, 0o600)).To(Succeed())
		}
		Eventually(servedCert, 30*time.Second).Should(Equal(sha256.Sum256(pemBlock(renewed.CAPEM))))

		Expect(cmd.Process.Signal(syscall.SIGTERM)).To(Succeed())
		Eventually(exited, 15*time.Second).Should(BeClosed())
		Expect(exitErr).NotTo(HaveOccurred())
		logged, err := os.ReadFile(logFile)
		Expect(err).NotTo(HaveOccurred())
		Expect(string(logged)).To(ContainSubstring("config server listening"))
		Expect(string(logged)).To(ContainSubstring(`"path":"/api/v1/data"`))
		for _, secret := range []string{planted, clientSecret, token} {
			Expect(string(logged)).NotTo(ContainSubstring(secret))
		}
	})
})

// pemBlock is the DER of a PEM certificate.
func pemBlock(p []byte) []byte {
	block, _ := pem.Decode(p)
	return block.Bytes
}
