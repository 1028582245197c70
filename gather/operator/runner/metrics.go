package runner

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/bosh-injector/bosh-injector/gather/names"
	"github.com/bosh-injector/bosh-injector/gather/operator/status"
)

// The runner's metrics, served beside the webhook's on the operator's
// metrics endpoint.
var (
	gatherings = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "bosh_injector_gatherings_total",
		Help: "Finished gatherings by result (Gathered, GatherFailed, InvalidManifest).",
	}, []string{"result"})
	gatheringDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "bosh_injector_gathering_duration_seconds",
		Help:    "Time from a gathering Job's start to its completion or failure.",
		Buckets: prometheus.ExponentialBuckets(0.5, 2, 12),
	})
	lastSuccess = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "bosh_injector_last_successful_gathering_timestamp_seconds",
		Help: "When the deployment's last successful gathering finished (Unix time).",
	}, []string{"namespace", "deployment"})
	deploymentsByState = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "bosh_injector_deployments",
		Help: "Deployments (manifest Secrets) by the state of their last gathering.",
	}, []string{"state"})
)

func init() {
	metrics.Registry.MustRegister(gatherings, gatheringDuration, lastSuccess, deploymentsByState)
}

// stateMetrics keeps the state of every manifest Secret the runner saw, for
// the deployments-by-state gauge.
type stateMetrics struct {
	mu     sync.Mutex
	states map[types.NamespacedName]string
}

func (m *stateMetrics) state(manifest *corev1.Secret, state string) {
	m.set(client.ObjectKeyFromObject(manifest), status.StateOf(state))
}

// forget drops a deleted manifest Secret.
func (m *stateMetrics) forget(key types.NamespacedName) { m.set(key, "") }

func (m *stateMetrics) set(key types.NamespacedName, state string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.states == nil {
		m.states = map[types.NamespacedName]string{}
	}
	if state == "" {
		delete(m.states, key)
	} else {
		m.states[key] = state
	}
	counts := map[string]float64{}
	for _, s := range status.States() {
		counts[s] = 0
	}
	for _, s := range m.states {
		counts[s]++
	}
	for s, n := range counts {
		deploymentsByState.WithLabelValues(s).Set(n)
	}
}

// finished records a gathering that ended with result; job is nil for a
// manifest rejected before any Job ran.
func finished(manifest *corev1.Secret, result string, job *batchv1.Job) {
	gatherings.WithLabelValues(result).Inc()
	if job == nil || job.Status.StartTime == nil {
		return
	}
	end := time.Now()
	if job.Status.CompletionTime != nil {
		end = job.Status.CompletionTime.Time
	}
	gatheringDuration.Observe(end.Sub(job.Status.StartTime.Time).Seconds())
	if result == status.ReasonGathered {
		lastSuccess.WithLabelValues(manifest.Namespace, manifest.Labels[names.LabelDeployment]).Set(float64(end.Unix()))
	}
}
