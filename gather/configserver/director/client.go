package director

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/bosh-injector/bosh-injector/gather/model/yamlvalue"
)

// Client talks to a config server's CredHub API as the director's
// ConfigServerHTTPClient does.
type Client struct {
	// data is the server's URL joined with "v1/data", as the director
	// joins it: "https://h:8844/api/" gives ".../api/v1/data" (CredHub),
	// "https://h:8080/" gives "/v1/data" (BOSH's config-server).
	data *url.URL
	http *http.Client
	auth Tokens
}

// Tokens gives the bearer token of each request; renew asks for a new one
// after the server refused the last (401).
type Tokens interface {
	Token(ctx context.Context, renew bool) (string, error)
}

// NewClient is a client of the server at serverURL, with httpClient (whose
// transport trusts the server's CA) and tokens (none: no Authorization).
func NewClient(serverURL string, httpClient *http.Client, tokens Tokens) (*Client, error) {
	base, err := url.Parse(serverURL)
	if err != nil || base.Scheme == "" || base.Host == "" {
		return nil, fmt.Errorf("config server URL %q: want https://host[:port]/path/", serverURL)
	}
	return &Client{data: base.ResolveReference(&url.URL{Path: "v1/data"}), http: httpClient, auth: tokens}, nil
}

// Credential is one version of a credential as CredHub shows it.
type Credential struct {
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Type  string          `json:"type"`
	Value json.RawMessage `json:"value"`
}

// HTTPError is a server's answer other than 200, with CredHub's error text.
type HTTPError struct {
	Code    int
	Message string
}

func (e *HTTPError) Error() string {
	return fmt.Sprintf("HTTP Code '%d', Error: '%s'", e.Code, e.Message)
}

// NotFound says whether err is the server's 404.
func NotFound(err error) bool {
	var h *HTTPError
	return errors.As(err, &h) && h.Code == http.StatusNotFound
}

// Unreachable is a request that never got an answer, after retries: the
// gathering can be retried once the server is back.
type Unreachable struct{ Err error }

func (e *Unreachable) Error() string { return "config server unreachable: " + e.Err.Error() }
func (e *Unreachable) Unwrap() error { return e.Err }

// Current is the current version of name.
func (c *Client) Current(ctx context.Context, name string) (*Credential, error) {
	u := *c.data
	u.RawQuery = url.Values{"name": {name}, "current": {"true"}}.Encode()
	var page struct {
		Data []Credential `json:"data"`
	}
	if err := c.do(ctx, http.MethodGet, &u, nil, &page); err != nil {
		return nil, err
	}
	if len(page.Data) == 0 {
		return nil, &HTTPError{Code: http.StatusNotFound, Message: "no version of " + name}
	}
	return &page.Data[0], nil
}

// ByID is the version id.
func (c *Client) ByID(ctx context.Context, id string) (*Credential, error) {
	u := c.data.JoinPath(url.PathEscape(id))
	var cred Credential
	return &cred, c.do(ctx, http.MethodGet, u, nil, &cred)
}

// GenerateRequest is the body of POST v1/data.
type GenerateRequest struct {
	Name string `json:"name"`
	Type string `json:"type"`
	// Parameters are the variable's options, a JSON object ({} when none).
	Parameters *yamlvalue.Map `json:"parameters"`
	Mode       string         `json:"mode,omitempty"`
}

// Generate has the server generate (or, by Mode, keep) a credential.
func (c *Client) Generate(ctx context.Context, req GenerateRequest) (*Credential, error) {
	var cred Credential
	return &cred, c.do(ctx, http.MethodPost, c.data, req, &cred)
}

// Set writes a new version of name holding value, of CredHub type typ.
func (c *Client) Set(ctx context.Context, name, typ string, value any) (*Credential, error) {
	return c.set(ctx, name, typ, value, "")
}

// set is Set with a write mode (CredHub 1.x's; "" for none).
func (c *Client) set(ctx context.Context, name, typ string, value any, mode string) (*Credential, error) {
	var cred Credential
	body := map[string]any{"name": name, "type": typ, "value": value}
	if mode != "" {
		body["mode"] = mode
	}
	return &cred, c.do(ctx, http.MethodPut, c.data, body, &cred)
}

// attempts and backoff bound the retries of a request that got no answer.
const (
	attempts = 4
	backoff  = time.Second
)

// do sends a request, renewing the token once on 401 and retrying
// connection failures.
func (c *Client) do(ctx context.Context, method string, u *url.URL, body, out any) error {
	var data []byte
	if body != nil {
		var err error
		if data, err = json.Marshal(body); err != nil {
			return err
		}
	}
	renew := false
	for try := 1; ; try++ {
		req, err := http.NewRequestWithContext(ctx, method, u.String(), bytes.NewReader(data))
		if err != nil {
			return err
		}
		if c.auth != nil {
			token, err := c.auth.Token(ctx, renew)
			if err != nil {
				return err
			}
			req.Header.Set("Authorization", "Bearer "+token)
		}
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := c.http.Do(req)
		if err != nil {
			var netErr net.Error
			if ctx.Err() == nil && try < attempts && errors.As(err, &netErr) {
				time.Sleep(time.Duration(try) * backoff)
				continue
			}
			if ctx.Err() == nil && errors.As(err, &netErr) {
				return &Unreachable{Err: err}
			}
			return err
		}
		answer, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
		resp.Body.Close()
		if err != nil {
			return err
		}
		if resp.StatusCode == http.StatusUnauthorized && !renew {
			renew = true
			continue
		}
		if resp.StatusCode != http.StatusOK {
			return &HTTPError{Code: resp.StatusCode, Message: errorText(answer)}
		}
		if err := json.Unmarshal(answer, out); err != nil {
			return fmt.Errorf("Response is not valid JSON")
		}
		return nil
	}
}

// maxAnswer bounds what a server's answer may hold: far above a page of
// certificates.
const maxAnswer = 16 << 20

// errorText is CredHub's {"error": "..."}, or the body as it is.
func errorText(body []byte) string {
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil && e.Error != "" {
		return e.Error
	}
	return string(bytes.TrimSpace(body))
}
