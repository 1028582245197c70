package webhook_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime/debug"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/bosh-injector/bosh-injector/gather/bpm"
	"github.com/bosh-injector/bosh-injector/gather/names"
	"github.com/bosh-injector/bosh-injector/gather/secretdata"
	"github.com/bosh-injector/bosh-injector/gather/versions"
	"github.com/bosh-injector/bosh-injector/inject"
	"github.com/bosh-injector/bosh-injector/test/controlplane"
	"github.com/bosh-injector/bosh-injector/webhook"
)

// BenchmarkAdmissionTLS sends 200 concurrent pod admissions for a 10-job
// group over TLS on 127.0.0.1, to the injecting handler (answering from its
// Secret cache) and to a no-op handler on the same server, and reports the
// p50 and p99 latency of each; the injecting handler's p99 also at Go's
// default GOGC, against the operator's GCPercent.
func BenchmarkAdmissionTLS(b *testing.B) {
	cp, err := controlplane.Start(controlplane.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer cp.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	info := bpm.Info{Deployment: "big", InstanceGroup: "g", Instances: 200, Lifecycle: "service", ResolvedSecret: "big.ig-resolved.g-v1",
		BPM: []bpm.InstanceBPM{{Jobs: map[string]bpm.Config{}}}}
	for i := range 200 {
		info.BPM[0].Indexes = append(info.BPM[0].Indexes, i)
	}
	for j := range 10 {
		name := fmt.Sprintf("job%d", j)
		info.Releases = append(info.Releases, bpm.Release{Name: "rel" + name, Version: "1", Image: "localhost/" + name + ":1"})
		info.Jobs = append(info.Jobs, bpm.Job{Name: name, Release: "rel" + name, Scripts: []string{"pre-start"}})
		info.BPM[0].Jobs[name] = bpm.Config{Processes: []bpm.Process{{Name: name, Executable: "/var/vcap/packages/" + name + "/bin/run",
			Env: bpm.DefaultEnv(name), Workdir: "/var/vcap/jobs/" + name}}}
	}
	data, _ := secretdata.Encode(info)
	if _, err := versions.Write(ctx, cp.Client, versions.Desired{Key: versions.Key{Namespace: "default", Deployment: "big", Kind: names.KindBPM, InstanceGroup: "g"},
		Data: map[string][]byte{bpm.InfoKey: data}}); err != nil {
		b.Fatal(err)
	}
	c, err := cache.New(cp.Config, cache.Options{})
	if err != nil {
		b.Fatal(err)
	}
	go func() { _ = c.Start(ctx) }()
	c.WaitForCacheSync(ctx)

	certDir := b.TempDir()
	caPEM, err := writeServingCert(certDir)
	if err != nil {
		b.Fatal(err)
	}
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	server := crwebhook.NewServer(crwebhook.Options{Host: "127.0.0.1", Port: port, CertDir: certDir})
	timings := map[string]*timed{webhook.Path: {}, "/noop": {}}
	server.Register(webhook.Path, &crwebhook.Admission{Handler: timings[webhook.Path].wrap(
		&webhook.Handler{Cache: c, Settings: inject.Settings{OperatorImage: "op:1"}, Log: logr.Discard()})})
	server.Register("/noop", &crwebhook.Admission{Handler: timings["/noop"].wrap(admission.HandlerFunc(func(context.Context, admission.Request) admission.Response {
		return admission.Allowed("")
	}))})
	go func() { _ = server.Start(ctx) }()

	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}, MaxIdleConnsPerHost: 200}}
	for server.StartedChecker()(&http.Request{}) != nil {
		time.Sleep(10 * time.Millisecond)
	}
	reviews := make([][]byte, 200)
	for i := range reviews {
		pod := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("g-%d", i), Namespace: "default", Labels: map[string]string{
			names.LabelDeployment: "big", names.LabelInstanceGroup: "g", "apps.kubernetes.io/pod-index": fmt.Sprint(i)}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "placeholder", Image: "busybox"}}}}
		raw, _ := json.Marshal(pod)
		reviews[i], _ = json.Marshal(admissionv1.AdmissionReview{
			TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
			Request: &admissionv1.AdmissionRequest{UID: "u", Namespace: "default", Operation: admissionv1.Create,
				Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}, Object: runtime.RawExtension{Raw: raw}}})
	}
	// round returns the handler latency percentiles measured in the server,
	// and the round trip's as the client saw it.
	round := func(path string) (p50, p99, rt99 time.Duration) {
		timings[path].reset()
		lat := make([]time.Duration, len(reviews))
		var wg sync.WaitGroup
		for i := range reviews {
			wg.Go(func() {
				start := time.Now()
				resp, err := client.Post(fmt.Sprintf("https://127.0.0.1:%d%s", port, path), "application/json", bytes.NewReader(reviews[i]))
				if err != nil {
					b.Error(err)
					return
				}
				var review admissionv1.AdmissionReview
				_ = json.NewDecoder(resp.Body).Decode(&review)
				// Drained bodies let the transport reuse the connection, so
				// rounds measure admissions, not TLS handshakes.
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				lat[i] = time.Since(start)
				if review.Response == nil || !review.Response.Allowed {
					b.Errorf("%s: not allowed: %+v", path, review.Response)
				}
			})
		}
		wg.Wait()
		slices.Sort(lat)
		p50, p99 = timings[path].percentiles()
		return p50, p99, lat[len(lat)*99/100]
	}
	round(webhook.Path) // warm connections and caches
	round("/noop")
	// The operator's GC setting against Go's default, in the same run.
	defer debug.SetGCPercent(debug.SetGCPercent(webhook.GCPercent))
	for b.Loop() {
		debug.SetGCPercent(100)
		_, dp99, _ := round(webhook.Path)
		debug.SetGCPercent(webhook.GCPercent)
		ip50, ip99, irt := round(webhook.Path)
		np50, np99, nrt := round("/noop")
		b.ReportMetric(float64(dp99.Microseconds())/1000, "inject-gogc100-p99-ms")
		b.ReportMetric(float64(ip50.Microseconds())/1000, "inject-p50-ms")
		b.ReportMetric(float64(ip99.Microseconds())/1000, "inject-p99-ms")
		b.ReportMetric(float64(np50.Microseconds())/1000, "noop-p50-ms")
		b.ReportMetric(float64(np99.Microseconds())/1000, "noop-p99-ms")
		b.ReportMetric(float64(irt.Microseconds())/1000, "inject-roundtrip-p99-ms")
		b.ReportMetric(float64(nrt.Microseconds())/1000, "noop-roundtrip-p99-ms")
	}
}

// timed records how long a handler takes, in the server.
type timed struct {
	mu  sync.Mutex
	lat []time.Duration
}

func (t *timed) wrap(h admission.Handler) admission.Handler {
	return admission.HandlerFunc(func(ctx context.Context, req admission.Request) admission.Response {
		start := time.Now()
		resp := h.Handle(ctx, req)
		t.mu.Lock()
		t.lat = append(t.lat, time.Since(start))
		t.mu.Unlock()
		return resp
	})
}

func (t *timed) reset() {
	t.mu.Lock()
	t.lat = nil
	t.mu.Unlock()
}

func (t *timed) percentiles() (p50, p99 time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	slices.Sort(t.lat)
	return t.lat[len(t.lat)/2], t.lat[len(t.lat)*99/100]
}
