package auth

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bosh-injector/bosh-injector/gather/configserver/credhub"
)

// Client is an OAuth client allowed to get tokens.
type Client struct {
	Name string
	// SecretName is a Secret in the server's namespace whose key "secret"
	// holds the client secret and whose optional key "scopes" lists the
	// client's scopes (space-separated; both CredHub scopes when absent).
	SecretName string
}

// Authenticator turns a request's credentials into a Caller.
type Authenticator struct {
	Issuer *Issuer
	// Client reads client Secrets and ServiceAccounts and creates
	// TokenReviews.
	Client    client.Client
	Namespace string
	Clients   []Client
	// Audience is what ServiceAccount tokens must be issued for.
	Audience string
	// Director is the director name of a namespace's deployments.
	Director func(namespace string) string
	// URL is the server's external URL, the tokens' issuer; empty takes
	// the request's host.
	URL string
	Log logr.Logger

	mu sync.Mutex
	// reviewed caches TokenReview answers by token hash, briefly: a
	// gathering makes a request per variable.
	reviewed map[[32]byte]review
}

type review struct {
	caller  *Caller
	expires time.Time
}

// reviewTTL is how long a TokenReview's answer is reused.
const reviewTTL = 30 * time.Second

// Failure is a refused authentication: an HTTP status and a UAA/CredHub
// error body.
type Failure struct {
	Status      int
	Code        string
	Description string
}

// Write answers the request with f.
func (f *Failure) Write(w http.ResponseWriter) {
	if f.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer error=%q, error_description=%q`, f.Code, f.Description))
	}
	writeJSON(w, f.Status, map[string]string{"error": f.Code, "error_description": f.Description})
}

var (
	failMissing   = &Failure{http.StatusUnauthorized, "access_denied", "Full authentication is required to access this resource"}
	failExpired   = &Failure{http.StatusUnauthorized, "access_token_expired", "Access token expired"}
	failSignature = &Failure{http.StatusUnauthorized, "invalid_token", credhub.InvalidTokenSignature}
	failMalformed = &Failure{http.StatusUnauthorized, "invalid_token", credhub.MalformedToken}
	failReview    = &Failure{http.StatusUnauthorized, "invalid_token", "The request token could not be verified."}
	failInternal  = &Failure{http.StatusInternalServerError, "server_error", credhub.InternalServerError}
)

// Authenticate checks the request's bearer token: one of ours is verified
// with the signing key, any other goes to a TokenReview.
func (a *Authenticator) Authenticate(r *http.Request) (*Caller, *Failure) {
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		token, ok = strings.CutPrefix(r.Header.Get("Authorization"), "bearer ")
	}
	token = strings.TrimSpace(token)
	if !ok || token == "" {
		return nil, failMissing
	}
	if a.Issuer.Ours(token) {
		claims, failure := a.verify(token)
		if failure != nil {
			return nil, failure
		}
		return &Caller{Who: "client " + claims.ClientID,
			Read: slices.Contains(claims.Scope, ScopeRead), Write: slices.Contains(claims.Scope, ScopeWrite)}, nil
	}
	if strings.Count(token, ".") != 2 {
		return nil, failMalformed
	}
	return a.review(r.Context(), token)
}

// verify checks one of the issuer's tokens.
func (a *Authenticator) verify(token string) (*Claims, *Failure) {
	claims, err := a.Issuer.Verify(token)
	switch err {
	case nil:
		return claims, nil
	case ErrExpired:
		return nil, failExpired
	case ErrMalformed:
		return nil, failMalformed
	default:
		return nil, failSignature
	}
}

// review authenticates a ServiceAccount token with a TokenReview and maps
// the account to its scope.
func (a *Authenticator) review(ctx context.Context, token string) (*Caller, *Failure) {
	key := sha256.Sum256([]byte(token))
	now := time.Now()
	a.mu.Lock()
	if c, ok := a.reviewed[key]; ok && now.Before(c.expires) {
		a.mu.Unlock()
		return c.caller, nil
	}
	a.mu.Unlock()

	tr := &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: []string{a.Audience}}}
	if err := a.Client.Create(ctx, tr); err != nil {
		a.Log.Error(err, "TokenReview failed")
		return nil, failInternal
	}
	if !tr.Status.Authenticated || !slices.Contains(tr.Status.Audiences, a.Audience) {
		a.Log.V(1).Info("ServiceAccount token refused", "reason", tr.Status.Error)
		return nil, failReview
	}
	ns, name, ok := splitServiceAccount(tr.Status.User.Username)
	if !ok {
		a.Log.Info("token of a user, not a ServiceAccount, refused", "user", tr.Status.User.Username)
		return nil, failReview
	}
	var sa corev1.ServiceAccount
	// An account outside the contract may use no name: every answer is
	// CredHub's 404, as for a name outside a gathering's scope.
	caller := &Caller{Who: "serviceaccount " + ns + "/" + name, Read: true, Write: true, Scope: &Scope{}}
	if err := a.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &sa); client.IgnoreNotFound(err) != nil {
		a.Log.Error(err, "reading the caller's ServiceAccount", "serviceAccount", ns+"/"+name)
		return nil, failInternal
	} else if err == nil {
		if s, ok := ScopeOf(a.Director(ns), &sa); ok {
			caller.Scope = &s
		}
	}
	a.mu.Lock()
	if a.reviewed == nil || len(a.reviewed) > 10000 {
		a.reviewed = map[[32]byte]review{}
	}
	a.reviewed[key] = review{caller: caller, expires: now.Add(reviewTTL)}
	a.mu.Unlock()
	return caller, nil
}

// ServeToken is UAA's POST /oauth/token for the client_credentials grant.
// The client authenticates with HTTP Basic (client_secret_basic; with
// X-CF-ENCODED-CREDENTIALS: true the id and secret are form-encoded first,
// as UAA reads them) or with client_id and client_secret in the form
// (client_secret_post).
func (a *Authenticator) ServeToken(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_request", "error_description": "The request body could not be read"})
		return
	}
	id, secret, basic := r.BasicAuth()
	if basic && strings.EqualFold(r.Header.Get("X-CF-ENCODED-CREDENTIALS"), "true") {
		var err1, err2 error
		id, err1 = url.QueryUnescape(id)
		secret, err2 = url.QueryUnescape(secret)
		if err1 != nil || err2 != nil {
			id = "" // no client has it: Bad credentials
		}
	}
	if !basic {
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	scopes, ok := a.checkClient(r.Context(), id, secret)
	if !ok {
		w.Header().Set("WWW-Authenticate", `Basic realm="UAA/client", error="unauthorized", error_description="Bad credentials"`)
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "unauthorized", "error_description": "Bad credentials"})
		return
	}
	if gt := r.PostForm.Get("grant_type"); gt != "client_credentials" {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "unsupported_grant_type", "error_description": "Unsupported grant type: " + gt})
		return
	}
	base := a.URL
	if base == "" {
		base = "https://" + r.Host
	}
	token, claims, err := a.Issuer.Issue(id, scopes, base)
	if err != nil {
		a.Log.Error(err, "signing a token")
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": "server_error", "error_description": "Internal Server Error"})
		return
	}
	a.Log.Info("token issued", "client", id, "scopes", scopes)
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, map[string]any{
		"access_token": token,
		"token_type":   "bearer",
		"expires_in":   int(time.Until(claims.ExpiresAt.Time).Seconds()),
		"scope":        strings.Join(scopes, " "),
		"jti":          claims.ID,
	})
}

// checkClient compares secret with the client's, read from its Secret on
// each request so a rotated secret counts at once.
func (a *Authenticator) checkClient(ctx context.Context, id, secret string) ([]string, bool) {
	i := slices.IndexFunc(a.Clients, func(c Client) bool { return c.Name == id })
	if i < 0 || secret == "" {
		return nil, false
	}
	var sec corev1.Secret
	if err := a.Client.Get(ctx, client.ObjectKey{Namespace: a.Namespace, Name: a.Clients[i].SecretName}, &sec); err != nil {
		a.Log.Error(err, "reading a client's Secret", "client", id, "secret", a.Clients[i].SecretName)
		return nil, false
	}
	want := sec.Data["secret"]
	if len(want) == 0 || subtle.ConstantTimeCompare(want, []byte(secret)) != 1 {
		return nil, false
	}
	scopes := strings.Fields(string(sec.Data["scopes"]))
	if len(scopes) == 0 {
		scopes = []string{ScopeRead, ScopeWrite}
	}
	return scopes, true
}

// ServeRevoke is UAA's DELETE /oauth/token/revoke/<jti>, which `credhub
// logout` calls with the token itself. The tokens are JWTs that are not
// revocable, as UAA's are unless made revocable: they stay valid until
// they expire, and the answer says so only by being UAA's 200.
func (a *Authenticator) ServeRevoke(w http.ResponseWriter, r *http.Request) {
	token, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	claims, failure := a.verify(token)
	if failure == nil && claims.ID != r.PathValue("jti") {
		failure = failSignature
	}
	if failure != nil {
		failure.Write(w)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// ServeKeys is UAA's GET /token_keys.
func (a *Authenticator) ServeKeys(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(a.Issuer.JWKS())
}

// ServeKey is UAA's GET /token_key, the one key without the set around it.
func (a *Authenticator) ServeKey(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, a.Issuer.JWK())
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// splitServiceAccount splits a ServiceAccount's user name,
// system:serviceaccount:<namespace>:<name>.
func splitServiceAccount(user string) (namespace, name string, ok bool) {
	rest, ok := strings.CutPrefix(user, "system:serviceaccount:")
	if !ok {
		return "", "", false
	}
	namespace, name, ok = strings.Cut(rest, ":")
	return namespace, name, ok && namespace != "" && name != "" && !strings.Contains(name, ":")
}
