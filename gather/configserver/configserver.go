// Package configserver is bosh-injector's embedded config server: a
// CredHub-API server, as a BOSH director uses for ((variables)), with its
// credentials in Kubernetes Secrets (package store), CredHub's endpoints
// (package api), UAA's token endpoints and ServiceAccount-token checks
// (package auth) and CredHub's generators (package generate).
//
// The rest of bosh-injector joins it through two things: the server's URL
// (CredHub's API, so any CredHub client works) and auth.ScopeOf, which
// says which names a gathering Job's ServiceAccount may use.
//
// The server's own ServiceAccount needs: get, list, create and delete on
// Secrets in Options.Namespace (the versions, the signing key, the
// clients' secrets); get on ServiceAccounts where gathering Jobs run; and
// create on tokenreviews.authentication.k8s.io.
package configserver

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/bosh-injector/bosh-injector/gather/configserver/api"
	"github.com/bosh-injector/bosh-injector/gather/configserver/auth"
	"github.com/bosh-injector/bosh-injector/gather/configserver/director"
	"github.com/bosh-injector/bosh-injector/gather/configserver/generate"
	"github.com/bosh-injector/bosh-injector/gather/configserver/store"
)

// Options configure a server.
type Options struct {
	// Namespace holds the credentials, the token signing key and the
	// clients' Secrets.
	Namespace string
	// Directors is the /<director>/ prefix of each namespace's
	// deployments' names.
	Directors director.Directors
	// Audience is what ServiceAccount tokens must be issued for.
	Audience string
	// Clients may get tokens at /oauth/token.
	Clients []auth.Client
	// SigningKeySecret is the Secret holding the token signing key,
	// created when missing.
	SigningKeySecret string
	// CertDir holds tls.crt and tls.key, reloaded when they change.
	CertDir string
	// Address is the listen address, host:port.
	Address string
	// URL is the server's external URL, /info's auth-server.url and the
	// tokens' issuer; empty takes the request's host.
	URL string
	// SpareKeys is how many RSA keys the server keeps generated ahead.
	SpareKeys int
}

// New builds the server's HTTP handler; it reads (or first creates) the
// token signing key.
func New(ctx context.Context, c client.Client, o Options, log logr.Logger) (http.Handler, error) {
	key, err := auth.LoadKey(ctx, c, o.Namespace, o.SigningKeySecret)
	if err != nil {
		return nil, err
	}
	authn := &auth.Authenticator{
		Issuer: auth.NewIssuer(key), Client: c, Namespace: o.Namespace, Clients: o.Clients,
		Audience: o.Audience, URL: o.URL, Log: log.WithName("auth"),
		Director: o.Directors.Of,
	}
	s := &api.Server{
		Store:         &store.Store{Client: c, Namespace: o.Namespace},
		Auth:          authn,
		AuthServerURL: o.URL,
		Log:           log.WithName("api"),
	}
	return s.Handler(), nil
}

// Run serves the API over TLS until ctx ends.
func Run(ctx context.Context, cfg *rest.Config, o Options, log logr.Logger) error {
	// The certificate watcher logs through controller-runtime's logger.
	ctrllog.SetLogger(log)
	// No cache: a replica must see what the other wrote a moment ago.
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return err
	}
	h, err := New(ctx, c, o, log)
	if err != nil {
		return err
	}
	go generate.PrepareKeys(ctx, o.SpareKeys)
	watcher, err := certwatcher.New(filepath.Join(o.CertDir, corev1.TLSCertKey), filepath.Join(o.CertDir, corev1.TLSPrivateKeyKey))
	if err != nil {
		return fmt.Errorf("serving certificate: %w", err)
	}
	go func() {
		if err := watcher.Start(ctx); err != nil {
			log.Error(err, "watching the serving certificate")
		}
	}()
	ln, err := net.Listen("tcp", o.Address)
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		TLSConfig:         &tls.Config{GetCertificate: watcher.GetCertificate, MinVersion: tls.VersionTLS12},
	}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	log.Info("config server listening", "address", ln.Addr().String(), "namespace", o.Namespace, "director", o.Directors.Default, "namespaceDirectors", o.Directors.ByNamespace)
	if err := srv.ServeTLS(ln, "", ""); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
