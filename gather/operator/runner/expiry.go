package runner

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/bosh-injector/bosh-injector/gather/configserver/director"
	"github.com/bosh-injector/bosh-injector/gather/configserver/store"
	"github.com/bosh-injector/bosh-injector/gather/gathering/trust"
	"github.com/bosh-injector/bosh-injector/gather/names"
)

// ReasonCertificateExpiring warns of a generated certificate with a third
// or less of its lifetime left.
const ReasonCertificateExpiring = "CertificateExpiring"

// expiryCheck is how often certificates are looked at when none is near
// its warning time.
const expiryCheck = 24 * time.Hour

var certificateExpiry = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "bosh_injector_certificate_expiry_seconds",
	Help: "Seconds until a generated certificate variable expires (negative once expired).",
}, []string{"namespace", "deployment", "variable"})

func init() { metrics.Registry.MustRegister(certificateExpiry) }

// checkExpiry sets the expiry gauge of every generated certificate of the
// deployment (with the embedded config server: every certificate of its
// accepted variable set) and warns, naming the variable and never its
// value, of those with a third or less of their lifetime left. It returns
// when to look again: when the next certificate reaches its warning time,
// at most a day.
func (r *Reconciler) checkExpiry(ctx context.Context, manifest *corev1.Secret, deployment string, rec *trust.Record, now time.Time) (time.Duration, error) {
	certs, err := r.certificates(ctx, manifest, deployment, rec)
	if err != nil {
		return 0, err
	}
	next := expiryCheck
	for _, c := range certs {
		left := c.cert.NotAfter.Sub(now)
		certificateExpiry.WithLabelValues(manifest.Namespace, deployment, c.variable).Set(left.Seconds())
		warnAt := c.cert.NotAfter.Sub(c.cert.NotBefore) / 3
		if left > warnAt {
			next = min(next, left-warnAt)
			continue
		}
		r.Recorder.Eventf(manifest, c.related, corev1.EventTypeWarning, ReasonCertificateExpiring, "Expiry",
			"certificate variable '%s' expires %s (%s left of %s); %s", c.variable,
			c.cert.NotAfter.UTC().Format(time.RFC3339), left.Round(time.Hour), c.cert.NotAfter.Sub(c.cert.NotBefore).Round(time.Hour), c.rotate)
	}
	return next, nil
}

// certificate is a certificate variable of a deployment: its name, where
// it is kept (nil: a config server) and how to rotate it.
type certificate struct {
	variable string
	cert     *x509.Certificate
	related  runtime.Object
	rotate   string
}

// certificates are the deployment's certificate variables: its variable
// Secrets', and those of its accepted variable set on the embedded
// server, whose store is in the operator's namespace.
func (r *Reconciler) certificates(ctx context.Context, manifest *corev1.Secret, deployment string, rec *trust.Record) ([]certificate, error) {
	var out []certificate
	if r.Config.ConfigServer.Mode == director.ModeEmbedded && rec != nil && rec.VariableSet != nil {
		var set corev1.Secret
		if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: manifest.Namespace, Name: rec.VariableSet.Name}, &set); err != nil {
			return nil, client.IgnoreNotFound(err)
		}
		var ids map[string]string
		if err := json.Unmarshal(set.Data[names.VariableSetKey], &ids); err != nil {
			return nil, fmt.Errorf("variable set %s: %w", set.Name, err)
		}
		versions, err := (&store.Store{Client: r.uncached(), Namespace: r.Config.TrustNamespace}).ByIDs(ctx, slices.Collect(maps.Values(ids)))
		if err != nil {
			return nil, err
		}
		for _, name := range slices.Sorted(maps.Keys(ids)) {
			v, ok := versions[ids[name]]
			var value struct {
				Certificate string `json:"certificate"`
			}
			if !ok || v.Type != "certificate" || json.Unmarshal(v.Value, &value) != nil {
				continue
			}
			if cert := parseCertificate([]byte(value.Certificate)); cert != nil {
				out = append(out, certificate{variable: name, cert: cert,
					rotate: fmt.Sprintf("`credhub regenerate -n %s`, then set annotation %s to deploy again", name, names.AnnotationRedeploy)})
			}
		}
		return out, nil
	}
	var list corev1.SecretList
	if err := r.Client.List(ctx, &list, client.InNamespace(manifest.Namespace), CredentialsSelector(deployment)); err != nil {
		return nil, err
	}
	for i := range list.Items {
		s := &list.Items[i]
		cert := parseCertificate(s.Data["certificate"])
		if cert == nil {
			continue
		}
		variable := s.Annotations[names.AnnotationVariable]
		if variable == "" {
			variable = s.Name
		}
		out = append(out, certificate{variable: variable, cert: cert, related: s, rotate: fmt.Sprintf("delete Secret %s to regenerate it", s.Name)})
	}
	return out, nil
}

// parseCertificate reads a PEM certificate, nil when it holds none.
func parseCertificate(data []byte) *x509.Certificate {
	block, _ := pem.Decode(data)
	if block == nil {
		return nil
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil
	}
	return cert
}
