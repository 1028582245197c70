package podstate_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/bosh-injector/bosh-injector/gather/operator/podstate"
)

// The not-ready containers probed through the setup server are asked, not
// to wait; the answer of a ready one, a why said already, the setup probe
// and containers with another probe are left out.
func TestProbeAnswers(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !r.URL.Query().Has("nowait") {
			http.Error(w, "asked to wait", http.StatusInternalServerError)
			return
		}
		if c := r.URL.Query().Get("container"); c == "web-server" || c == "web-other" {
			http.Error(w, "process 'server' of job 'web' is not running: it exited 3", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("running\n"))
	}))
	defer srv.Close()
	host, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	p, _ := strconv.Atoi(port)
	probe := func(container string) *corev1.Probe {
		return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready?container=" + container, Port: intstr.FromInt(p)}}}
	}
	pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{
		{Name: "web-server", ReadinessProbe: probe("web-server")},
		{Name: "web-metrics", ReadinessProbe: probe("web-metrics")},
		{Name: "web-other", ReadinessProbe: probe("web-other")},
		{Name: "setup", ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/setup", Port: intstr.FromInt(p)}}}},
		{Name: "dns-checked", ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}}},
	}}, Status: corev1.PodStatus{PodIP: host}}
	got := podstate.ProbeAnswers(context.Background(), pod, []string{"web-server", "web-metrics", "web-other", "setup", "dns-checked"})
	if want := []string{"web-server: process 'server' of job 'web' is not running: it exited 3"}; !slices.Equal(got, want) {
		t.Errorf("answers %q, want %q", got, want)
	}
	pod.Status.PodIP = ""
	if got := podstate.ProbeAnswers(context.Background(), pod, []string{"web-server"}); got != nil {
		t.Errorf("a pod without an IP answered %q", got)
	}
}
