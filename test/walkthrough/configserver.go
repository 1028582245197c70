package walkthrough

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The walkthrough's chart has one client of the embedded config server, as
// a director or the credhub CLI would be: clientName, its secret in Secret
// clientSecret.
const (
	clientName   = "walkthrough"
	clientSecret = Release + "-walkthrough-client"
	// configServer is the chart's config server Service, and its TLS
	// Secret.
	configServer    = Release + "-config-server"
	configServerTLS = configServer + "-tls"
)

// clientValues are the chart values naming the walkthrough's client.
func clientValues() []string {
	return []string{"--set", "configServer.embedded.clients[0].name=" + clientName, "--set", "configServer.embedded.clients[0].secretName=" + clientSecret}
}

// createClient creates the client's Secret: the server reads it when the
// client asks for a token.
func (w *Walkthrough) createClient(ctx context.Context) error {
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: clientSecret},
		StringData: map[string]string{"secret": rand.Text()}}
	return client.IgnoreAlreadyExists(w.Client.Create(ctx, secret))
}

// FetchCredential fetches the current version of credential name from the
// embedded config server with curl, the way the credhub CLI asks (a token
// for the client at /oauth/token, then GET /api/v1/data), and narrates the
// commands and the answer, credentials redacted. It reaches a server pod
// at its address, which a local cluster routes to this machine.
func (w *Walkthrough) FetchCredential(ctx context.Context, name string) (map[string]any, error) {
	w.Step("The embedded config server holds the deployment's credentials, as a director's CredHub: %s fetched with curl as the credhub CLI asks", name)
	var pods corev1.PodList
	if err := w.Client.List(ctx, &pods, client.InNamespace(Namespace), client.MatchingLabels{"app.kubernetes.io/name": "bosh-injector-config-server"}); err != nil {
		return nil, err
	}
	ip := ""
	for _, p := range pods.Items {
		if p.Status.PodIP != "" && p.DeletionTimestamp == nil {
			ip = p.Status.PodIP
		}
	}
	if ip == "" {
		return nil, fmt.Errorf("no config server pod has an address")
	}
	var tls, secret corev1.Secret
	if err := w.Client.Get(ctx, client.ObjectKey{Namespace: Namespace, Name: configServerTLS}, &tls); err != nil {
		return nil, err
	}
	if err := w.Client.Get(ctx, client.ObjectKey{Namespace: Namespace, Name: clientSecret}, &secret); err != nil {
		return nil, err
	}
	ca := filepath.Join(w.opts.Dir, "config-server-ca.crt")
	if err := os.WriteFile(ca, tls.Data["ca.crt"], 0o600); err != nil {
		return nil, err
	}
	host := configServer + "." + Namespace + ".svc"
	base := "https://" + host + ":8844"
	// curl runs with the credentials in its arguments' place of the
	// narration: the narration names them.
	curl := func(shown string, args ...string) ([]byte, error) {
		w.Say("$ curl --cacert ca.crt %s", shown)
		cmd := exec.CommandContext(ctx, "curl", append([]string{"-sS", "--fail-with-body", "--cacert", ca, "--resolve", host + ":8844:" + ip}, args...)...)
		out, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("curl %s: %w: %s", shown, err, out)
		}
		return out, nil
	}
	out, err := curl(base+"/oauth/token -d grant_type=client_credentials -d client_id="+clientName+` -d client_secret="$SECRET"`,
		base+"/oauth/token", "-d", "grant_type=client_credentials", "-d", "client_id="+clientName, "-d", "client_secret="+string(secret.Data["secret"]))
	if err != nil {
		return nil, err
	}
	var token struct {
		AccessToken string `json:"access_token"`
		TokenType   string `json:"token_type"`
		ExpiresIn   int    `json:"expires_in"`
	}
	if err := json.Unmarshal(out, &token); err != nil {
		return nil, fmt.Errorf("the token answer: %w", err)
	}
	w.Say("  a %s token for %d s (an RS256 JWT, keys at /token_keys)", token.TokenType, token.ExpiresIn)
	query := base + "/api/v1/data?name=" + name + "&current=true"
	if out, err = curl(`-H "Authorization: bearer $TOKEN" '`+query+`'`, "-H", "Authorization: bearer "+token.AccessToken, query); err != nil {
		return nil, err
	}
	shown, err := w.Redact(ctx, "", string(out))
	if err != nil {
		return nil, err
	}
	w.Say("  %s", strings.TrimSpace(shown))
	var page struct {
		Data []map[string]any `json:"data"`
	}
	if err := json.Unmarshal(out, &page); err != nil || len(page.Data) != 1 {
		return nil, fmt.Errorf("the server's answer is no page of one credential: %v", err)
	}
	return page.Data[0], nil
}
