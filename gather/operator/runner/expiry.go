package runner

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

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
// deployment and warns, naming the variable and never its value, of those
// with a third or less of their lifetime left. It returns when to look
// again: when the next certificate reaches its warning time, at most a day.
func (r *Reconciler) checkExpiry(ctx context.Context, manifest *corev1.Secret, deployment string, now time.Time) (time.Duration, error) {
	var list corev1.SecretList
	if err := r.Client.List(ctx, &list, client.InNamespace(manifest.Namespace), CredentialsSelector(deployment)); err != nil {
		return 0, err
	}
	next := expiryCheck
	for _, s := range list.Items {
		block, _ := pem.Decode(s.Data["certificate"])
		if block == nil {
			continue
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			continue
		}
		variable := s.Annotations[names.AnnotationVariable]
		if variable == "" {
			variable = s.Name
		}
		left := cert.NotAfter.Sub(now)
		certificateExpiry.WithLabelValues(manifest.Namespace, deployment, variable).Set(left.Seconds())
		warnAt := cert.NotAfter.Sub(cert.NotBefore) / 3
		if left > warnAt {
			next = min(next, left-warnAt)
			continue
		}
		r.Recorder.Eventf(manifest, &s, corev1.EventTypeWarning, ReasonCertificateExpiring, "Expiry",
			"certificate variable '%s' expires %s (%s left of %s); delete Secret %s to regenerate it", variable,
			cert.NotAfter.UTC().Format(time.RFC3339), left.Round(time.Hour), cert.NotAfter.Sub(cert.NotBefore).Round(time.Hour), s.Name)
	}
	return next, nil
}
