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
)

// probeWait bounds the questions: the setup server waits a few seconds
// for a process being started before it answers.
const probeWait = 10 * time.Second

// ProbeAnswers asks, for each of the named containers whose readiness probe
// is an HTTP GET (a BPM process container's, answered by the instance's
// setup server), why it is not ready, as the director asks the agent: the
// kubelet's Event of such a probe names only the status code. Each answer
// is "<container>: <why>"; a container that cannot be asked (no pod IP, a
// network in the way) or is ready now is left out.
func ProbeAnswers(ctx context.Context, pod *corev1.Pod, containers []string) []string {
	if pod.Status.PodIP == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, probeWait)
	defer cancel()
	var answers []string
	for _, c := range pod.Spec.Containers {
		if !slices.Contains(containers, c.Name) || c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet == nil {
			continue
		}
		get := c.ReadinessProbe.HTTPGet
		url := "http://" + net.JoinHostPort(pod.Status.PodIP, get.Port.String()) + get.Path
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			continue
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			continue
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			answers = append(answers, fmt.Sprintf("%s: %s", c.Name, strings.TrimSpace(string(body))))
		}
	}
	return answers
}
