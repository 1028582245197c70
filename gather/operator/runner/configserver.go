package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/bosh-injector/bosh-injector/gather/configserver/director"
	"github.com/bosh-injector/bosh-injector/gather/names"
)

// ConfigServer is the director's config server gatherings use.
type ConfigServer struct {
	// Mode is director.ModeEmbedded, ModeExternal or ModeSecrets (when
	// empty: no server, variables in Secrets).
	Mode string
	// URL is the server's CredHub API URL, as the director's
	// config_server.url.
	URL string
	// CAFile holds the PEM of the server's CA; it is read for each Job, as
	// a mounted Secret is renewed in place.
	CAFile string
	// Directors is the /<director>/ of names in each namespace.
	Directors director.Directors
	// UAA, in external mode, gets gatherings their tokens.
	UAA UAA
}

// UAA is the token issuer of an external config server, as the director's
// config_server.uaa.
type UAA struct {
	URL, ClientID string
	// ClientSecret is a Secret in the operator's namespace and its key
	// holding the client secret: the runner copies it for each gathering.
	ClientSecret, ClientSecretKey string
	// CAFile and PublicKeyFile hold PEMs: the UAA's CA and its token
	// signing key (tokens verified when set); empty when not given.
	CAFile, PublicKeyFile string
}

// server says whether gatherings use a config server.
func (c ConfigServer) server() bool { return c.Mode != "" && c.Mode != director.ModeSecrets }

// Validate checks c as the operator's flags give it.
func (c ConfigServer) Validate() error {
	switch c.Mode {
	case director.ModeSecrets, "":
		return nil
	case director.ModeEmbedded, director.ModeExternal:
	default:
		return fmt.Errorf("--config-server-mode: want %s, %s or %s, got %q", director.ModeEmbedded, director.ModeExternal, director.ModeSecrets, c.Mode)
	}
	if !strings.HasPrefix(c.URL, "https://") {
		// As the director's config check.
		return fmt.Errorf("Config Server URL should always be https. Currently it is %s", c.URL)
	}
	if c.Mode == director.ModeEmbedded && c.CAFile == "" {
		return fmt.Errorf("--config-server-mode=embedded needs --config-server-ca-file")
	}
	if c.UAA.URL != "" && (c.UAA.ClientID == "" || c.UAA.ClientSecret == "") {
		return fmt.Errorf("--uaa-url needs --uaa-client-id and --uaa-client-secret-secret")
	}
	return c.Directors.Validate()
}

// Files of the gather container's token volume, which templates are kept
// from reading: its token for the embedded server, and an external
// server's UAA client secret.
const (
	configServerToken = "config-server-token"
	uaaClientSecret   = "uaa-client-secret"
)

// access gives a gathering pod what it needs to use the server: the
// gather container's flags, the public PEMs in its environment (kept off
// the command line `ps` shows), and its credential in the token volume.
func (c ConfigServer) access(pod *corev1.PodSpec, namespace, deployment, name string) error {
	if !c.server() {
		return nil
	}
	gather := &pod.Containers[0]
	gather.Args = append(gather.Args, "--config-server-url="+c.URL, "--director-name="+c.Directors.Of(namespace), "--deployment-name="+name)
	for _, pem := range []struct{ env, file string }{
		{"BOSH_INJECTOR_CONFIG_SERVER_CA", c.CAFile},
		{"BOSH_INJECTOR_UAA_CA", c.UAA.CAFile},
		{"BOSH_INJECTOR_UAA_PUBLIC_KEY", c.UAA.PublicKeyFile},
	} {
		if pem.file == "" {
			continue
		}
		data, err := os.ReadFile(pem.file)
		if err != nil {
			return fmt.Errorf("the config server's PEMs: %w", err)
		}
		gather.Env = append(gather.Env, corev1.EnvVar{Name: pem.env, Value: string(data)})
	}
	var source corev1.VolumeProjection
	switch {
	case c.Mode == director.ModeEmbedded:
		gather.Args = append(gather.Args, "--config-server-token-file="+tokenDir+"/"+configServerToken)
		source.ServiceAccountToken = &corev1.ServiceAccountTokenProjection{Path: configServerToken, Audience: director.Audience, ExpirationSeconds: ptr.To[int64](3607)}
	case c.UAA.URL != "":
		gather.Args = append(gather.Args, "--uaa-url="+c.UAA.URL, "--uaa-client-id="+c.UAA.ClientID, "--uaa-client-secret-file="+tokenDir+"/"+uaaClientSecret)
		source.Secret = &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: names.ConfigServerClient(deployment)},
			Items: []corev1.KeyToPath{{Key: uaaClientSecret, Path: uaaClientSecret}}}
	default:
		return nil
	}
	for i := range pod.Volumes {
		if pod.Volumes[i].Name == tokenVolume {
			pod.Volumes[i].Projected.Sources = append(pod.Volumes[i].Projected.Sources, source)
		}
	}
	return nil
}

// importable are the variables of inputs whose <deployment>.var-<name>
// Secrets exist, with a config server: a deployment moving from Secrets
// onto it brings their values.
func (r *Reconciler) importable(ctx context.Context, manifest *corev1.Secret, deployment string, inputs Inputs) ([]string, error) {
	if !r.Config.ConfigServer.server() {
		return nil, nil
	}
	var out []string
	for _, v := range inputs.Variables {
		if strings.HasPrefix(v, "/") {
			continue
		}
		s, err := r.variableSecret(ctx, manifest.Namespace, deployment, v)
		if err != nil {
			return nil, err
		}
		if s != nil {
			out = append(out, v)
		}
	}
	return out, nil
}

// ensureClientSecret copies an external server's UAA client secret from
// the operator's namespace into the deployment's, owned by the manifest
// Secret, where the gathering pod mounts it.
func (r *Reconciler) ensureClientSecret(ctx context.Context, manifest *corev1.Secret, deployment string) error {
	c := r.Config.ConfigServer
	if c.Mode != director.ModeExternal || c.UAA.URL == "" {
		return nil
	}
	var from corev1.Secret
	if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: r.Config.TrustNamespace, Name: c.UAA.ClientSecret}, &from); err != nil {
		return fmt.Errorf("the UAA client secret: %w", err)
	}
	value, ok := from.Data[c.UAA.ClientSecretKey]
	if !ok {
		return fmt.Errorf("the UAA client secret: Secret %s has no key %s", c.UAA.ClientSecret, c.UAA.ClientSecretKey)
	}
	want := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: names.ConfigServerClient(deployment), Namespace: manifest.Namespace, Labels: r.labels(deployment)},
		Data: map[string][]byte{uaaClientSecret: value}}
	if err := controllerutil.SetControllerReference(manifest, want, r.Client.Scheme()); err != nil {
		return err
	}
	err := r.Client.Create(ctx, want)
	if apierrors.IsAlreadyExists(err) {
		var have corev1.Secret
		if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(want), &have); err != nil {
			return err
		}
		if string(have.Data[uaaClientSecret]) == string(value) {
			return nil
		}
		have.Data = want.Data
		err = r.Client.Update(ctx, &have)
	}
	return err
}

// serverScope is what the gathering's ServiceAccount tells the config
// server: the deployment's name and the absolute names its manifest uses
// (((/x)) references), which it may read and write besides its own.
func serverScope(inputs Inputs) (map[string]string, error) {
	var grants []string
	for _, v := range inputs.Variables {
		if strings.HasPrefix(v, "/") {
			grants = append(grants, v)
		}
	}
	annotations := map[string]string{director.AnnotationDeployment: inputs.Name}
	if len(grants) > 0 {
		slices.Sort(grants)
		data, err := json.Marshal(grants)
		if err != nil {
			return nil, err
		}
		annotations[director.AnnotationGrants] = string(data)
	}
	return annotations, nil
}
