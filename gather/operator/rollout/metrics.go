package rollout

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// The deploy controller's metrics, served on the operator's metrics
// endpoint.
var (
	deploys = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "bosh_injector_deploys_total",
		Help: "Finished deploys by result (Deployed, DeployFailed).",
	}, []string{"result"})
	steps = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "bosh_injector_deploy_steps_total",
		Help: "Steps of instance group updates released, by kind (canary, batch, delete: unneeded instances removed).",
	}, []string{"kind"})
)

func init() {
	metrics.Registry.MustRegister(deploys, steps)
}
