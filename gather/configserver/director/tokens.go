package director

import (
	"context"
	"crypto"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// TokenFile is a token the kubelet keeps fresh in a file: a gathering Job's
// projected ServiceAccount token for the embedded server. It is read for
// every request.
type TokenFile string

// Token implements Tokens.
func (f TokenFile) Token(context.Context, bool) (string, error) {
	data, err := os.ReadFile(string(f))
	if err != nil {
		return "", fmt.Errorf("reading the config server token: %w", err)
	}
	return strings.TrimSpace(string(data)), nil
}

// ClientCredentials gets tokens from a UAA with the client_credentials
// grant, as the director's UAAAuthProvider does, and keeps one until shortly
// before it expires.
type ClientCredentials struct {
	// TokenURL is the UAA's /oauth/token.
	TokenURL     string
	ClientID     string
	ClientSecret string
	HTTP         *http.Client
	// PublicKey, when set, verifies each token's RS256 signature.
	PublicKey crypto.PublicKey

	mu      sync.Mutex
	token   string
	expires time.Time
}

// Token implements Tokens.
func (c *ClientCredentials) Token(ctx context.Context, renew bool) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !renew && c.token != "" && time.Now().Before(c.expires) {
		return c.token, nil
	}
	form := url.Values{"grant_type": {"client_credentials"}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.TokenURL, strings.NewReader(form.Encode()))
	if err != nil {
		return "", err
	}
	// UAA reads URL-encoded credentials when told so; ids and secrets may
	// hold any character.
	req.SetBasicAuth(url.QueryEscape(c.ClientID), url.QueryEscape(c.ClientSecret))
	req.Header.Set("X-CF-ENCODED-CREDENTIALS", "true")
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return "", &Unreachable{Err: err}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		// The answer may echo what was sent: only the status is told.
		return "", fmt.Errorf("UAA %s refused client '%s' a token: HTTP Code '%d'", c.TokenURL, c.ClientID, resp.StatusCode)
	}
	var t struct {
		AccessToken string `json:"access_token"`
		ExpiresIn   int64  `json:"expires_in"`
	}
	if err := json.Unmarshal(body, &t); err != nil || t.AccessToken == "" {
		return "", fmt.Errorf("UAA %s answered client '%s' without an access token", c.TokenURL, c.ClientID)
	}
	if c.PublicKey != nil {
		if _, err := jwt.Parse(t.AccessToken, func(*jwt.Token) (any, error) { return c.PublicKey, nil },
			jwt.WithValidMethods([]string{"RS256"})); err != nil {
			return "", fmt.Errorf("UAA %s gave client '%s' a token its public key does not verify: %v", c.TokenURL, c.ClientID, err)
		}
	}
	c.token = t.AccessToken
	// A token is renewed a little before it expires, never used stale.
	c.expires = time.Now().Add(time.Duration(t.ExpiresIn)*time.Second - 30*time.Second)
	return c.token, nil
}
