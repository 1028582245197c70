package podstate

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/bosh-injector/bosh-injector/inject/runtime/contract"
)

// probeWait bounds the questions, asked without the probe's wait for what
// is still starting (contract.NoWait): the deploy asks after its watch time.
const probeWait = 5 * time.Second

// probeClient asks the pod itself, never through a proxy the operator's
// environment names.
var probeClient = &http.Client{Transport: &http.Transport{Proxy: nil}}

// ProbeAnswers asks, for each of the named containers whose readiness probe
// is the setup server's (a BPM process container's HTTP GET of
// contract.ReadyPath), why it is not ready, as the director asks the
// agent: the kubelet's Event of such a probe names only the status code.
// Each answer is "<container>: <why>", a why shared by several containers
// (a failed post-start) once; a container that cannot be asked (no pod IP,
// a network in the way) or is ready now is left out.
func ProbeAnswers(ctx context.Context, pod *corev1.Pod, containers []string) []string {
	return ask(ctx, pod, containers, func(status int) bool { return status != http.StatusOK })
}

// Failed are the answers, as ProbeAnswers gives them, of the pod's process
// containers that failed for good (contract.FailedStatus: a post-start
// failed).
func Failed(ctx context.Context, pod *corev1.Pod) []string {
	var containers []string
	for _, c := range pod.Spec.Containers {
		containers = append(containers, c.Name)
	}
	return ask(ctx, pod, containers, func(status int) bool { return status == contract.FailedStatus })
}

// ask asks the named containers' readiness probes, as ProbeAnswers says,
// keeping the answers whose status keep accepts.
func ask(ctx context.Context, pod *corev1.Pod, containers []string, keep func(status int) bool) []string {
	if pod.Status.PodIP == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, probeWait)
	defer cancel()
	var answers, whys []string
	for _, c := range pod.Spec.Containers {
		if !slices.Contains(containers, c.Name) || c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet == nil ||
			!strings.HasPrefix(c.ReadinessProbe.HTTPGet.Path, contract.ReadyPath+"?") {
			continue
		}
		get := c.ReadinessProbe.HTTPGet
		url := "http://" + net.JoinHostPort(pod.Status.PodIP, get.Port.String()) + get.Path + "&" + contract.NoWait
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			continue
		}
		resp, err := probeClient.Do(req)
		if err != nil {
			continue
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		if why := strings.TrimSpace(string(body)); keep(resp.StatusCode) && !slices.Contains(whys, why) {
			whys = append(whys, why)
			answers = append(answers, fmt.Sprintf("%s: %s", c.Name, why))
		}
	}
	return answers
}
