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
	goruntime "runtime"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/sync/errgroup"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	kjson "sigs.k8s.io/json"

	"github.com/bosh-injector/bosh-injector/gather/gathering/secretdata"
	"github.com/bosh-injector/bosh-injector/gather/gathering/trust"
	"github.com/bosh-injector/bosh-injector/gather/model/bpm"
	"github.com/bosh-injector/bosh-injector/gather/model/yamlvalue"
	"github.com/bosh-injector/bosh-injector/gather/names"
	"github.com/bosh-injector/bosh-injector/gather/operator/manager"
	"github.com/bosh-injector/bosh-injector/gather/render/resolved"
	"github.com/bosh-injector/bosh-injector/inject"
	"github.com/bosh-injector/bosh-injector/test/controlplane"
	"github.com/bosh-injector/bosh-injector/test/fixtures"
	"github.com/bosh-injector/bosh-injector/webhook"
)

// shape is a pod's size: jobs (each of its own release, with one package
// and a pre-start script), BPM processes per job.
type shape struct{ jobs, procs int }

var shapes = []shape{{1, 1}, {10, 1}, {50, 4}}

const instances = 500

// patchBefore is the patch, in bytes, of each shape's pod as the handler
// made it before issue 27 (copy init containers, one pre-start container
// per job, every process container with liveness and readiness probes and
// a preStop hook): the acceptance compares against it.
var patchBefore = map[int]float64{1: 5044, 10: 30626, 50: 369646}

// groupInfo is the BPM info of group "g<jobs>" of deployment dep.
func groupInfo(dep string, s shape) bpm.Info {
	g := fmt.Sprintf("g%d", s.jobs)
	info := bpm.Info{Deployment: dep, InstanceGroup: g, Instances: instances, Lifecycle: "service", ResolvedSecret: dep + ".ig-resolved." + g + "-v1",
		BPM: []bpm.InstanceBPM{{Jobs: map[string]bpm.Config{}}}}
	for i := range instances {
		info.BPM[0].Indexes = append(info.BPM[0].Indexes, i)
	}
	for j := range s.jobs {
		name := fmt.Sprintf("job%d", j)
		info.Releases = append(info.Releases, bpm.Release{Name: "rel" + name, Version: "1", Image: "localhost/" + name + ":1"})
		info.Jobs = append(info.Jobs, bpm.Job{Name: name, Release: "rel" + name, Scripts: []string{"pre-start"}, Packages: []string{name}})
		var procs []bpm.Process
		for p := range s.procs {
			procs = append(procs, bpm.Process{Name: fmt.Sprintf("%s-%d", name, p), Executable: "/var/vcap/packages/" + name + "/bin/run",
				Args: []string{"--config", "/var/vcap/jobs/" + name + "/config/config.yml"}, Env: bpm.DefaultEnv(name), Workdir: "/var/vcap/jobs/" + name})
		}
		info.BPM[0].Jobs[name] = bpm.Config{Processes: procs}
	}
	return info
}

// podJSON is the StatefulSet pod of ordinal i of info's group.
func podJSON(info bpm.Info, i int) []byte {
	pod := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", info.InstanceGroup, i), Namespace: "default", Labels: map[string]string{
		names.LabelDeployment: info.Deployment, names.LabelInstanceGroup: info.InstanceGroup, "apps.kubernetes.io/pod-index": fmt.Sprint(i)}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "placeholder", Image: "busybox"}}}}
	raw, _ := json.Marshal(pod)
	return raw
}

// diffHandler is the handler as it was before its patch was built from
// the mutation: the whole mutated pod encoded and diffed against the
// request. It reads its BPM info from memory, so it is measured without the
// cache read the real handler makes.
type diffHandler struct {
	infos    map[string]*bpm.Info
	settings inject.Settings
}

// mutate decodes and mutates the request's pod: the part of an admission
// that is inject's, whichever way the patch is made.
func (d diffHandler) mutate(raw []byte) (*corev1.Pod, admission.Response, bool) {
	var pod corev1.Pod
	if err := json.Unmarshal(raw, &pod); err != nil {
		return nil, admission.Errored(http.StatusBadRequest, err), false
	}
	info := d.infos[pod.Labels[names.LabelInstanceGroup]]
	inst, err := inject.InstanceOf(&pod, info)
	if err == nil {
		err = inject.Mutate(&pod, inject.Plan{Info: info, Instance: inst, Settings: d.settings})
	}
	if err != nil {
		return nil, admission.Errored(http.StatusInternalServerError, err), false
	}
	return &pod, admission.Response{}, true
}

func (d diffHandler) Handle(_ context.Context, req admission.Request) admission.Response {
	pod, failed, ok := d.mutate(req.Object.Raw)
	if !ok {
		return failed
	}
	patched, err := json.Marshal(pod)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	return admission.PatchResponseFromRaw(req.Object.Raw, patched)
}

// BenchmarkAdmission measures pod admissions for pods of 1, 10 and 50 jobs
// (the 50 with 4 BPM processes each), with the handler answering from its
// Secret cache on a real API server, against the former whole-pod diff in
// the same run:
//   - in one goroutine, the process CPU time, allocations and bytes per
//     admission (the response's patch encoded, as the server does), and
//     the CPU the API server spends decoding that response against the
//     no-op's;
//   - over TLS on 127.0.0.1 at 50, 200 and 500 concurrent requests, the
//     client's round trip p99 (the median of interleaved rounds) to the
//     handler, to the former one, to a no-op handler and to one answering
//     the handler's patch without any work (the floor any handler making
//     that patch has: client and server share the machine's cores) on the
//     same server, and the ratios to the no-op's. The injecting handler's p99
//     also at Go's default GOGC for 10 jobs at 200, against the
//     operator's GCPercent.
func BenchmarkAdmission(b *testing.B) {
	// The webhook server logs a response it could not write (a client gone
	// at the end of a round); unset, controller-runtime prints a stack.
	ctrllog.SetLogger(logr.Discard())
	cp, err := controlplane.Start(controlplane.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer cp.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	settings := inject.Settings{OperatorImage: "op:1"}
	diff := diffHandler{infos: map[string]*bpm.Info{}, settings: settings}
	if err := cp.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: benchOperatorNamespace}}); err != nil {
		b.Fatal(err)
	}
	for _, s := range shapes {
		info := groupInfo("big", s)
		if err := fixtures.StoreInfo(ctx, cp.Client, benchOperatorNamespace, "default", info); err != nil {
			b.Fatal(err)
		}
		diff.infos[info.InstanceGroup] = &info
	}
	c, err := cache.New(cp.Config, cache.Options{})
	if err != nil {
		b.Fatal(err)
	}
	go func() { _ = c.Start(ctx) }()
	c.WaitForCacheSync(ctx)
	handler := &webhook.Handler{Cache: c, Settings: settings, OperatorNamespace: benchOperatorNamespace, Log: logr.Discard()}
	imageSettings := settings
	imageSettings.ReleaseJobs = inject.ReleaseJobsImage
	images := &webhook.Handler{Cache: c, Settings: imageSettings, OperatorNamespace: benchOperatorNamespace, Log: logr.Discard()}
	defer debug.SetGCPercent(debug.SetGCPercent(manager.GCPercent))

	// Sub-benchmarks, so one part can be run alone:
	// -bench 'Admission/cpu', -bench 'Admission/concurrent/10jobs'.
	b.Run("cpu", func(b *testing.B) {
		for b.Loop() {
			b.Log("handler CPU per admission, one goroutine (diff: the former whole-pod diff, without its cache read)")
			for _, s := range shapes {
				info := diff.infos[fmt.Sprintf("g%d", s.jobs)]
				req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{UID: "u", Namespace: "default", Operation: admissionv1.Create,
					Object: runtime.RawExtension{Raw: podJSON(*info, 7)}}}
				now := perAdmission(b, handler, req)
				was := perAdmission(b, diff, req)
				floor := perAdmission(b, mutateOnly(diff), req)
				img := perAdmission(b, images, req)
				b.Logf("  %2d jobs: handler %7.0f µs %6.0f allocs %8.0f B | diff %7.0f µs %6.0f allocs %8.0f B | handler/diff CPU %.2f | decode and inject.Mutate %6.0f µs | patch %7.0f B (diff's %7.0f B; with image volumes %7.0f B, handler %5.0f µs)",
					s.jobs, now.us, now.allocs, now.bytes, was.us, was.allocs, was.bytes, now.us/was.us, floor.us, now.patch, was.patch, img.patch, img.us)
				b.Logf("  %2d jobs: patch / before issue 27's %6.0f B: copied %.2f, image volumes %.2f", s.jobs, patchBefore[s.jobs], now.patch/patchBefore[s.jobs], img.patch/patchBefore[s.jobs])
				b.ReportMetric(img.patch, fmt.Sprintf("patch-image-%djobs-B", s.jobs))
				b.ReportMetric(img.patch/patchBefore[s.jobs], fmt.Sprintf("patch-image/before-%djobs", s.jobs))
				b.ReportMetric(now.patch, fmt.Sprintf("patch-%djobs-B", s.jobs))
				answer, noop := clientDecode(b, handler, req), clientDecode(b, admission.HandlerFunc(func(context.Context, admission.Request) admission.Response {
					return admission.Allowed("")
				}), req)
				b.Logf("  %2d jobs: the client decoding the response as kube-apiserver does: handler's %7.0f µs | no-op's %4.1f µs | handler's/no-op's %5.1f",
					s.jobs, answer, noop, answer/noop)
				b.ReportMetric(now.us, fmt.Sprintf("handler-%djobs-µs", s.jobs))
				b.ReportMetric(now.us/was.us, fmt.Sprintf("handler/diff-%djobs-cpu", s.jobs))
			}
		}
	})
	b.Run("concurrent", func(b *testing.B) { concurrent(b, ctx, handler, diff) })
}

// mutateOnly decodes and mutates the pod and answers without a patch.
func mutateOnly(d diffHandler) admission.Handler {
	return admission.HandlerFunc(func(_ context.Context, req admission.Request) admission.Response {
		if _, failed, ok := d.mutate(req.Object.Raw); !ok {
			return failed
		}
		return admission.Allowed("")
	})
}

type cost struct{ us, allocs, bytes, patch float64 }

// perAdmission is the mean cost of one admission by h of req, response
// encoding included, after a warm-up.
func perAdmission(b *testing.B, h admission.Handler, req admission.Request) cost {
	const n = 200
	patch := 0
	run := func() {
		resp := h.Handle(context.Background(), req)
		if !resp.Allowed {
			b.Fatalf("not allowed: %v", resp.Result)
		}
		if err := resp.Complete(req); err != nil {
			b.Fatal(err)
		}
		patch = len(resp.Patch)
	}
	for range 20 {
		run()
	}
	goruntime.GC()
	var before, after goruntime.MemStats
	goruntime.ReadMemStats(&before)
	// Process CPU time, the collector's included, not wall time: the
	// machine may be busy with more than this benchmark.
	start := cpuTime()
	for range n {
		run()
	}
	elapsed := cpuTime() - start
	goruntime.ReadMemStats(&after)
	return cost{us: float64(elapsed.Microseconds()) / n, allocs: float64(after.Mallocs-before.Mallocs) / n, bytes: float64(after.TotalAlloc-before.TotalAlloc) / n, patch: float64(patch)}
}

// clientDecode is the mean CPU time, in µs, the API server spends decoding
// h's encoded response to req, as its admission plugin does (the JSON
// serializer's sigs.k8s.io/json): a patch travels base64 inside a JSON
// string, which the decoder scans byte by byte, whoever made the patch.
func clientDecode(b *testing.B, h admission.Handler, req admission.Request) float64 {
	const n = 200
	resp := h.Handle(context.Background(), req)
	if err := resp.Complete(req); err != nil {
		b.Fatal(err)
	}
	encoded, err := json.Marshal(admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Response: &resp.AdmissionResponse})
	if err != nil {
		b.Fatal(err)
	}
	decode := func() {
		var r admissionv1.AdmissionReview
		if err := kjson.UnmarshalCaseSensitivePreserveInts(encoded, &r); err != nil || r.Response == nil || !r.Response.Allowed {
			b.Fatalf("decoding the response: %v", err)
		}
	}
	for range 20 {
		decode()
	}
	goruntime.GC()
	start := cpuTime()
	for range n {
		decode()
	}
	return float64((cpuTime() - start).Nanoseconds()) / 1000 / n
}

// concurrent sends rounds of concurrent admissions over TLS.
func concurrent(b *testing.B, ctx context.Context, handler *webhook.Handler, diff diffHandler) {
	certDir := b.TempDir()
	caPEM, err := writeServingCert(certDir)
	if err != nil {
		b.Fatal(err)
	}
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	server := crwebhook.NewServer(crwebhook.Options{Host: "127.0.0.1", Port: port, CertDir: certDir})
	server.Register(webhook.Path, &crwebhook.Admission{Handler: handler})
	server.Register("/diff", &crwebhook.Admission{Handler: diff})
	server.Register("/noop", &crwebhook.Admission{Handler: admission.HandlerFunc(func(context.Context, admission.Request) admission.Response {
		return admission.Allowed("")
	})})
	// The fixed handler answers every request with the patch the handler
	// made for a pod of the shape measured, without any work: what carrying
	// that patch costs server and client alone.
	var fixed atomic.Pointer[admission.Response]
	server.Register("/fixed", &crwebhook.Admission{Handler: admission.HandlerFunc(func(context.Context, admission.Request) admission.Response {
		return *fixed.Load()
	})})
	go func() { _ = server.Start(ctx) }()
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	// The server closes connections idle for 90 s, which a slow round
	// under load leaves some of: the client drops them first, or its next
	// POST on one fails with EOF.
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}, MaxIdleConnsPerHost: 500, IdleConnTimeout: 60 * time.Second}}
	for server.StartedChecker()(&http.Request{}) != nil {
		time.Sleep(10 * time.Millisecond)
	}
	review := func(raw []byte) []byte {
		r, _ := json.Marshal(admissionv1.AdmissionReview{
			TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
			Request: &admissionv1.AdmissionRequest{UID: "u", Namespace: "default", Operation: admissionv1.Create,
				Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}, Object: runtime.RawExtension{Raw: raw}}})
		return r
	}
	// round sends n concurrent admissions of s-shaped pods to path and
	// returns the client's round trip p99.
	round := func(b *testing.B, path string, s shape, n int) time.Duration {
		info := diff.infos[fmt.Sprintf("g%d", s.jobs)]
		reviews := make([][]byte, n)
		for i := range reviews {
			reviews[i] = review(podJSON(*info, i))
		}
		// No round pays for the garbage of the one before.
		goruntime.GC()
		lat := make([]time.Duration, n)
		var wg sync.WaitGroup
		for i := range reviews {
			wg.Go(func() {
				start := time.Now()
				resp, err := client.Post(fmt.Sprintf("https://127.0.0.1:%d%s", port, path), "application/json", bytes.NewReader(reviews[i]))
				if err != nil {
					b.Error(err)
					return
				}
				var r admissionv1.AdmissionReview
				_ = json.NewDecoder(resp.Body).Decode(&r)
				// Drained bodies let the transport reuse the connection, so
				// rounds measure admissions, not TLS handshakes.
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				lat[i] = time.Since(start)
				if r.Response == nil || !r.Response.Allowed {
					b.Errorf("%s: not allowed: %+v", path, r.Response)
				}
			})
		}
		wg.Wait()
		slices.Sort(lat)
		return lat[n*99/100]
	}
	// Warm connections (500 of them) and caches.
	round(b, "/noop", shapes[0], 500)
	round(b, webhook.Path, shapes[0], 500)
	for _, s := range shapes {
		b.Run(fmt.Sprintf("%djobs", s.jobs), func(b *testing.B) {
			info := diff.infos[fmt.Sprintf("g%d", s.jobs)]
			resp := handler.Handle(ctx, admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{UID: "u", Namespace: "default", Operation: admissionv1.Create,
				Object: runtime.RawExtension{Raw: podJSON(*info, 0)}}})
			fixed.Store(&resp)
			for b.Loop() {
				b.Logf("client round trip p99 at n concurrent admissions over TLS, the median of %d interleaved rounds (diff: the former whole-pod diff; fixed: the handler's %d-byte patch answered without any work)",
					rounds, len(resp.Patch))
				for _, n := range []int{50, 200, 500} {
					p99 := medianRounds(func(path string) time.Duration { return round(b, path, s, n) }, "/noop", "/fixed", "/diff", webhook.Path)
					noop, floor, was, now := p99[0], p99[1], p99[2], p99[3]
					b.Logf("  %2d jobs × %3d: handler %7.1f ms | fixed %7.1f ms | diff %7.1f ms | no-op %6.1f ms | handler/no-op %5.1f | fixed/no-op %5.1f | diff/no-op %5.1f | handler/fixed %4.2f",
						s.jobs, n, ms(now), ms(floor), ms(was), ms(noop), float64(now)/float64(noop), float64(floor)/float64(noop), float64(was)/float64(noop), float64(now)/float64(floor))
					b.ReportMetric(float64(now)/float64(floor), fmt.Sprintf("rt-p99-handler/fixed-%d", n))
					b.ReportMetric(float64(now)/float64(noop), fmt.Sprintf("rt-p99-handler/noop-%d", n))
					b.ReportMetric(float64(floor)/float64(noop), fmt.Sprintf("rt-p99-fixed/noop-%d", n))
					if s.jobs == 10 && n == 200 {
						debug.SetGCPercent(100)
						gc100 := round(b, webhook.Path, s, n)
						debug.SetGCPercent(manager.GCPercent)
						b.Logf("  %2d jobs × %3d: handler at GOGC=100 %7.1f ms vs GOGC=%d %7.1f ms", s.jobs, n, ms(gc100), manager.GCPercent, ms(now))
					}
				}
			}
		})
	}
}

// rounds is how many rounds a p99 is the median of: one round's p99 is
// two or three requests of a few hundred, which a GC pause or the machine's
// other work moves by several times.
const rounds = 5

// medianRounds runs rounds interleaved rounds of the handlers at paths, so
// drift in the machine's load reaches each alike, and returns each one's
// median p99.
func medianRounds(round func(path string) time.Duration, paths ...string) []time.Duration {
	p99s := make([][]time.Duration, len(paths))
	for range rounds {
		for i, p := range paths {
			p99s[i] = append(p99s[i], round(p))
		}
	}
	medians := make([]time.Duration, len(paths))
	for i, ds := range p99s {
		slices.Sort(ds)
		medians[i] = ds[len(ds)/2]
	}
	return medians
}

func cpuTime() time.Duration {
	var u syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &u)
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// BenchmarkOperatorHeap reports the operator's heap with 50 deployments of
// 10 instance groups cached (each group's BPM info of 10 jobs, its resolved
// properties, and each deployment's manifest), every group's info decoded
// by one admission, against the bytes stored.
// benchOperatorNamespace holds the benchmarks' records of accepted versions.
const benchOperatorNamespace = "bosh-injector"

func BenchmarkOperatorHeap(b *testing.B) {
	cp, err := controlplane.Start(controlplane.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer cp.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const deployments, groups = 50, 10
	props := yamlvalue.NewMap()
	for p := range 100 {
		props.Set(fmt.Sprintf("setting_%d", p), fmt.Sprintf("a value of some realistic length for property %d", p))
	}
	stored := 0
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	var mu sync.Mutex
	write := func(s *corev1.Secret) {
		g.Go(func() error {
			mu.Lock()
			for _, v := range s.Data {
				stored += len(v)
			}
			mu.Unlock()
			return cp.Client.Create(gctx, s)
		})
	}
	versionSecrets := map[[3]string]*corev1.Secret{}
	for d := range deployments {
		dep := fmt.Sprintf("dep%d", d)
		write(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: dep, Namespace: "default", Labels: map[string]string{names.LabelDeployment: dep}},
			Data: map[string][]byte{names.ManifestKey: bytes.Repeat([]byte("# a manifest line of realistic length\n"), 200)}})
		for gi := range groups {
			info := groupInfo(dep, shape{10, 1})
			info.InstanceGroup, info.Instances = fmt.Sprintf("g%d", gi), 3
			info.BPM[0].Indexes = []int{0, 1, 2}
			info.ResolvedSecret = names.VersionedSecret(dep, names.KindResolved, info.InstanceGroup, 1)
			rg := resolved.Group{Deployment: dep, InstanceGroup: info.InstanceGroup, Instances: 3}
			for _, j := range info.Jobs {
				rg.Jobs = append(rg.Jobs, resolved.Job{Name: j.Name, Release: j.Release, ReleaseVersion: "1", Properties: props, Links: yamlvalue.NewMap()})
			}
			for kind, v := range map[string]any{names.KindBPM: info, names.KindResolved: rg} {
				data, err := secretdata.Encode(v)
				if err != nil {
					b.Fatal(err)
				}
				key := map[string]string{names.KindBPM: bpm.InfoKey, names.KindResolved: resolved.Key}[kind]
				s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: names.VersionedSecret(dep, kind, info.InstanceGroup, 1), Namespace: "default",
					Labels:      map[string]string{names.LabelDeployment: dep, names.LabelInstanceGroup: info.InstanceGroup, names.LabelSecretKind: kind, names.LabelVersion: "1"},
					Annotations: map[string]string{names.AnnotationInstanceGroupName: info.InstanceGroup}},
					Immutable: ptr.To(true), Data: map[string][]byte{key: data}}
				versionSecrets[[3]string{dep, info.InstanceGroup, kind}] = s
				write(s)
			}
		}
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
	if err := cp.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: benchOperatorNamespace}}); err != nil {
		b.Fatal(err)
	}
	for d := range deployments {
		dep := fmt.Sprintf("dep%d", d)
		written := trust.Written{}
		for gi := range groups {
			g := fmt.Sprintf("g%d", gi)
			written[g] = trust.WrittenOf(versionSecrets[[3]string{dep, g, names.KindBPM}], versionSecrets[[3]string{dep, g, names.KindResolved}])
		}
		if _, refused, err := trust.Accept(ctx, cp.Client, benchOperatorNamespace, "default", dep, "bench", written); err != nil || len(refused) > 0 {
			b.Fatal(err, refused)
		}
	}
	for b.Loop() {
		heap := func() uint64 {
			goruntime.GC()
			var m goruntime.MemStats
			goruntime.ReadMemStats(&m)
			return m.HeapAlloc
		}
		base := heap()
		opts, err := manager.CacheOptions(benchOperatorNamespace)
		if err != nil {
			b.Fatal(err)
		}
		c, err := cache.New(cp.Config, opts)
		if err != nil {
			b.Fatal(err)
		}
		cctx, stop := context.WithCancel(ctx)
		if _, err := c.GetInformer(cctx, &corev1.Secret{}); err != nil {
			b.Fatal(err)
		}
		go func() { _ = c.Start(cctx) }()
		c.WaitForCacheSync(cctx)
		h := &webhook.Handler{Cache: c, Settings: inject.Settings{OperatorImage: "op:1"}, OperatorNamespace: benchOperatorNamespace, Log: logr.Discard()}
		for d := range deployments {
			for gi := range groups {
				pod := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: map[string]string{names.LabelDeployment: fmt.Sprintf("dep%d", d),
					names.LabelInstanceGroup: fmt.Sprintf("g%d", gi), "apps.kubernetes.io/pod-index": "0"}},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "placeholder", Image: "busybox"}}}}
				raw, _ := json.Marshal(pod)
				if resp := h.Handle(ctx, admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Namespace: "default", Operation: admissionv1.Create,
					Object: runtime.RawExtension{Raw: raw}}}); !resp.Allowed {
					b.Fatalf("not allowed: %v", resp.Result)
				}
			}
		}
		cached := heap() - base
		b.Logf("operator heap with %d deployments × %d groups cached: %.1f MB (%.0f KB a group), %.1f× the %.1f MB of Secret data stored",
			deployments, groups, float64(cached)/(1<<20), float64(cached)/1024/(deployments*groups), float64(cached)/float64(stored), float64(stored)/(1<<20))
		b.ReportMetric(float64(cached)/(1<<20), "heap-MB")
		b.ReportMetric(float64(cached)/float64(stored), "heap/stored")
		goruntime.KeepAlive(h)
		stop()
	}
}
