// Package webhook is the operator's admission, and nothing else: Handler
// injects BOSH instances into labelled pods at creation, StatefulSets
// admits updates of a deployment's StatefulSets, keeping their claim
// templates and lowered replicas for the controllers. The operator's
// manager (gather/operator/manager) serves both; this package imports no
// controller, only their contract (gather/operator/status) and the
// StatefulSet update rules (gather/operator/statefulsets).
package webhook

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/lru"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	kjson "sigs.k8s.io/json"

	"github.com/bosh-injector/bosh-injector/gather/gathering/secretdata"
	"github.com/bosh-injector/bosh-injector/gather/gathering/trust"
	"github.com/bosh-injector/bosh-injector/gather/model/bpm"
	"github.com/bosh-injector/bosh-injector/gather/names"
	"github.com/bosh-injector/bosh-injector/inject"
)

// Path is where the webhook is served.
const Path = "/inject-pod"

var (
	requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "bosh_injector_admission_requests_total", Help: "Pod admission requests by result (injected, skipped, denied, error).",
	}, []string{"result"})
	denials = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "bosh_injector_denials_total", Help: "Denied pods by reason (a stable CamelCase code).",
	}, []string{"reason"})
	ignored = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "bosh_injector_ignored_secrets_total", Help: "Secrets carrying a deployment's labels that the webhook ignores, by reason.",
	}, []string{"reason"})
	latency = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "bosh_injector_admission_duration_seconds", Help: "Time to handle a pod admission request.",
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
	})
)

func init() { metrics.Registry.MustRegister(requests, denials, ignored, latency) }

// Handler injects pods. Cache must hold the Secrets labelled with a
// deployment and the records of accepted versions in OperatorNamespace (see
// CacheOptions): every admission is answered from it, without an API call.
type Handler struct {
	Cache    client.Reader
	Settings inject.Settings
	// DNSService, when set, names the CoreDNS Service in OperatorNamespace
	// whose cluster IP replaces Settings.DNS.Server. It is read from Cache
	// at every admission, so a Service created again with another cluster
	// IP is followed without restarting the operator.
	DNSService string
	// OperatorNamespace is never injected and holds the records of the
	// versions each deployment's gathering wrote (package trust).
	OperatorNamespace string
	// Recorder receives the warning Events about untrusted Secrets; nil
	// records none.
	Recorder events.EventRecorder
	Log      logr.Logger

	// decoded holds decoded BPM info by Secret UID, and verified the UIDs
	// whose content matched their record: versioned Secrets are immutable,
	// so neither changes for a UID.
	decoded, verified sync.Map
	// warned holds the UIDs of untrusted Secrets already reported.
	warned sync.Map
	// records decodes each version of a deployment's record once.
	records trust.Records
	// parts holds, by partsKey, an instance's injected parts and their
	// JSON: the pods of an instance (a StatefulSet's pod recreated, a
	// rollout's) get the same ones. partsSize is the containers and
	// volumes it holds; building is one miss at a time.
	parts     *lru.Cache
	partsSize int
	building  sync.Mutex
	partsOnce sync.Once
}

// partsKey is everything inject.Build reads: the decoded BPM info (one
// pointer per versioned Secret), the instance, the settings (with the
// pod's release-jobs choice), the namespace and the resolved digest.
type partsKey struct {
	info      *bpm.Info
	instance  inject.Instance
	settings  inject.Settings
	namespace string
	digest    string
}

// maxCachedParts and maxCachedElements bound the instances whose parts are
// kept and the containers and volumes they hold, the least recently
// admitted going first: a container and its JSON take about 5 KB, and the
// operator's memory limit is 256 MiB.
const (
	maxCachedParts    = 1024
	maxCachedElements = 8192
)

// cachedParts are an instance's parts and their JSON.
type cachedParts struct {
	parts *inject.Parts
	json  encodings
}

// partsFor returns plan's cached parts, built at the first pod asking.
func (h *Handler) partsFor(plan inject.Plan) *cachedParts {
	h.partsOnce.Do(func() {
		// Called with building held: only Add and RemoveOldest evict.
		h.parts = lru.NewWithEvictionFunc(maxCachedParts, func(_ lru.Key, v any) { h.partsSize -= v.(*cachedParts).parts.Size() })
	})
	key := partsKey{info: plan.Info, instance: plan.Instance, settings: plan.Settings, namespace: plan.Namespace, digest: plan.ResolvedDigest}
	if c, ok := h.parts.Get(key); ok {
		return c.(*cachedParts)
	}
	h.building.Lock()
	defer h.building.Unlock()
	if c, ok := h.parts.Get(key); ok {
		return c.(*cachedParts)
	}
	c := &cachedParts{parts: inject.Build(plan)}
	h.parts.Add(key, c)
	h.partsSize += c.parts.Size()
	for h.partsSize > maxCachedElements && h.parts.Len() > 1 {
		h.parts.RemoveOldest()
	}
	return c
}

// Handle implements admission.Handler.
func (h *Handler) Handle(ctx context.Context, req admission.Request) admission.Response {
	start := time.Now()
	defer func() { latency.Observe(time.Since(start).Seconds()) }()

	pod, err := decodePod(req)
	var denial *inject.Denial
	if errors.As(err, &denial) {
		return deny(h.Log.WithValues("namespace", req.Namespace), denial)
	}
	if err != nil {
		requests.WithLabelValues("error").Inc()
		h.Log.Info("denied", "namespace", req.Namespace, "reason", inject.ReasonInvalidPod, "error", err.Error())
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("%s: %w", inject.ReasonInvalidPod, err))
	}
	log := h.Log.WithValues("namespace", req.Namespace, "generateName", pod.GenerateName, "name", pod.Name)
	ig := pod.Labels[names.LabelInstanceGroup]
	deployment := pod.Labels[names.LabelDeployment]
	switch {
	case ig == "":
		return h.skip(log, inject.ReasonNotLabelled)
	case req.Namespace == h.OperatorNamespace:
		return h.skip(log, inject.ReasonOperatorNamespace)
	}
	var info *bpm.Info
	var accepted *trust.Version
	if deployment == "" {
		err = &inject.Denial{Reason: inject.ReasonNoDeployment, Message: fmt.Sprintf(
			"pod has label %s=%s but no label %s: label the pod template with the deployment whose instance group it runs",
			names.LabelInstanceGroup, ig, names.LabelDeployment)}
	} else {
		info, accepted, err = h.info(ctx, req, pod, deployment, ig)
	}
	var inst inject.Instance
	if err == nil {
		inst, err = inject.InstanceOf(pod, info)
	}
	var held bool
	var stopped string
	if err == nil {
		held, stopped, err = h.instanceState(ctx, req.Namespace, deployment, pod)
	}
	settings := h.Settings
	if err == nil && h.DNSService != "" {
		settings.DNS.Server, err = h.dnsServer(ctx)
	}
	var patch []byte
	if err == nil {
		// Mutate changes the pod in place; the patch is the difference,
		// with the JSON of what the instance's pods share encoded once.
		before := pod.DeepCopy()
		if stopped != "" {
			keepStopped(pod)
			log.Info("the instance is stopped: its pod starts stopped", "instance", stopped)
		}
		var parts *cachedParts
		build := func(plan inject.Plan) *inject.Parts {
			parts = h.partsFor(plan)
			return parts.parts
		}
		var added inject.Added
		if added, err = inject.MutateFrom(pod, inject.Plan{Info: info, Instance: inst, Settings: settings, Namespace: cmp.Or(pod.Namespace, req.Namespace),
			ResolvedDigest: accepted.Resolved.SHA256, Held: held}, build); err == nil {
			patch, err = podPatch(before, pod, &reuse{json: &parts.json, added: added})
		}
	}
	if errors.As(err, &denial) {
		return deny(log, denial)
	}
	if err != nil {
		requests.WithLabelValues("error").Inc()
		log.Error(err, "injection failed")
		return admission.Errored(http.StatusInternalServerError, err)
	}
	requests.WithLabelValues("injected").Inc()
	log.V(1).Info("injected", "deployment", deployment, "instanceGroup", ig, "index", inst.Index, "resolved", info.ResolvedSecret)
	resp := patched(patch)
	resp.Warnings = info.Warnings(inst.Index)
	return resp
}

// decodePod decodes the request's pod as the API server does (case
// sensitive), and without duplicate keys, so the patch's paths are the
// request's members. A request for anything but a pod, or a pod without
// a spec, is a *inject.Denial.
func decodePod(req admission.Request) (*corev1.Pod, error) {
	if k := req.Kind; (k.Kind != "" && k.Kind != "Pod") || k.Group != "" {
		return nil, &inject.Denial{Reason: inject.ReasonNotAPod, Message: fmt.Sprintf("the request is for a %s, the webhook injects pods (group \"\", kind Pod)", k.String())}
	}
	if len(req.Object.Raw) == 0 {
		return nil, &inject.Denial{Reason: inject.ReasonNoPodSpec, Message: "the request has no object"}
	}
	var pod corev1.Pod
	strict, err := kjson.UnmarshalStrict(req.Object.Raw, &pod, kjson.DisallowDuplicateFields)
	if err == nil && len(strict) > 0 {
		err = errors.Join(strict...)
	}
	if err != nil {
		return nil, err
	}
	if pod.Kind != "" && (pod.Kind != "Pod" || pod.APIVersion != "v1") {
		return nil, &inject.Denial{Reason: inject.ReasonNotAPod, Message: fmt.Sprintf("the object is a %s %s, the webhook injects v1 Pods", pod.APIVersion, pod.Kind)}
	}
	if len(pod.Spec.Containers) == 0 {
		return nil, &inject.Denial{Reason: inject.ReasonNoPodSpec, Message: "the pod has no spec with containers: an instance's pod comes from a StatefulSet's or Job's pod template"}
	}
	return &pod, nil
}

// deny answers a denial, counted and logged with its reason.
func deny(log logr.Logger, d *inject.Denial) admission.Response {
	requests.WithLabelValues("denied").Inc()
	return refuse(log, d)
}

// refuse answers a denial, for pods and StatefulSet updates alike: the
// reason's code counts in the denial metric, its text goes to the log.
func refuse(log logr.Logger, d *inject.Denial) admission.Response {
	denials.WithLabelValues(d.Reason.Code()).Inc()
	log.Info("denied", "reason", d.Reason, "message", d.Message)
	return admission.Denied(d.Error())
}

// dnsServer is the cluster IP of the DNSService.
func (h *Handler) dnsServer(ctx context.Context) (string, error) {
	var svc corev1.Service
	if err := h.Cache.Get(ctx, client.ObjectKey{Namespace: h.OperatorNamespace, Name: h.DNSService}, &svc); err != nil {
		return "", fmt.Errorf("reading the DNS Service %s/%s: %w", h.OperatorNamespace, h.DNSService, err)
	}
	if ip := svc.Spec.ClusterIP; ip != "" && ip != corev1.ClusterIPNone {
		return ip, nil
	}
	return "", fmt.Errorf("the DNS Service %s/%s has no cluster IP", h.OperatorNamespace, h.DNSService)
}

func (h *Handler) skip(log logr.Logger, r inject.Reason) admission.Response {
	requests.WithLabelValues("skipped").Inc()
	log.V(1).Info("skipped", "reason", r)
	return admission.Allowed(string(r))
}

// info returns the BPM info a pod of an instance group is injected from,
// and its accepted version: the version its template pins (annotations
// resolved-version and bpm-version), else the latest, of the versions the deployment's
// gatherings wrote, as the record in the operator's namespace names them. Pods carry BOSH names as users
// wrote them; Secrets and records carry them sanitized.
func (h *Handler) info(ctx context.Context, req admission.Request, pod *corev1.Pod, deployment, group string) (*bpm.Info, *trust.Version, error) {
	namespace := req.Namespace
	rec, err := h.records.Read(ctx, h.Cache, h.OperatorNamespace, namespace, deployment)
	if err != nil {
		return nil, nil, err
	}
	if rec == nil {
		return nil, nil, &inject.Denial{Reason: inject.ReasonNotGathered, Message: fmt.Sprintf(
			"deployment '%s' has not been gathered in namespace %s yet: create its manifest Secret (label %s=%s, key %s) and wait for its gathering Job; pods are retried",
			deployment, namespace, names.LabelDeployment, deployment, names.ManifestKey)}
	}
	// A record is written when the first gathering Job starts: until one
	// succeeds it names no group, and the group label is not to blame.
	if len(rec.Groups) == 0 {
		return nil, nil, &inject.Denial{Reason: inject.ReasonNotGathered, Message: fmt.Sprintf(
			"deployment '%s' has not been gathered in namespace %s yet: its gathering is running or failed (its manifest Secret's label %s and Events say which, a failure with the director's errors); pods are retried",
			deployment, namespace, names.LabelState)}
	}
	g, ok := rec.Groups[names.LabelValue(group)]
	if !ok {
		var groups []string
		for _, g := range rec.Groups {
			groups = append(groups, g.Name)
		}
		slices.Sort(groups)
		return nil, nil, &inject.Denial{Reason: inject.ReasonUnknownGroup, Message: fmt.Sprintf(
			"deployment '%s' has no instance group '%s'; its instance groups are %v: fix the pod template's label %s",
			deployment, group, groups, names.LabelInstanceGroup)}
	}
	h.warnUntrusted(ctx, req, deployment, group, g)
	v := g.Latest()
	if pin, ok := pod.Annotations[names.AnnotationResolvedVersion]; ok {
		n, err := strconv.Atoi(pin)
		if err == nil {
			v = g.Pinned(n)
			// The deploy pins the BPM info too (its release images): the
			// pods of an instance not updated yet keep their images. A
			// pruned one falls back to the resolved version's newest.
			if b, err := strconv.Atoi(pod.Annotations[names.AnnotationBPMVersion]); err == nil {
				if i := slices.IndexFunc(g.Versions, func(x trust.Version) bool { return x.Resolved.Version == n && x.BPM.Version == b }); i >= 0 {
					v = &g.Versions[i]
				}
			}
		}
		if err != nil || v == nil {
			var accepted []int
			for _, v := range g.Versions {
				accepted = append(accepted, v.Resolved.Version)
			}
			return nil, nil, &inject.Denial{Reason: inject.ReasonPinnedUnknown, Message: fmt.Sprintf(
				"the pod's annotation %s is %q, but the accepted resolved versions of instance group '%s' of deployment '%s' are %v: set one of them or remove the annotation for the latest",
				names.AnnotationResolvedVersion, pin, group, deployment, accepted)}
		}
	}
	if _, err := h.trusted(ctx, namespace, deployment, group, v.Resolved); err != nil {
		return nil, nil, err
	}
	s, err := h.trusted(ctx, namespace, deployment, group, v.BPM)
	if err != nil {
		return nil, nil, err
	}
	if info, ok := h.decoded.Load(s.UID); ok {
		return info.(*bpm.Info), v, nil
	}
	var info bpm.Info
	if err := secretdata.Decode(s.Data[bpm.InfoKey], &info); err != nil {
		return nil, nil, fmt.Errorf("reading %s: %w", s.Name, err)
	}
	h.decoded.Store(s.UID, &info)
	return &info, v, nil
}

// trusted returns the Secret r accepted from the cache, or a denial when it
// is gone or is another object or content now.
func (h *Handler) trusted(ctx context.Context, namespace, deployment, group string, r trust.Ref) (*corev1.Secret, error) {
	var s corev1.Secret
	// The Secrets are only read here, so the cache need not copy them.
	err := h.Cache.Get(ctx, client.ObjectKey{Namespace: namespace, Name: r.Name}, &s, client.UnsafeDisableDeepCopy)
	switch {
	case apierrors.IsNotFound(err):
		return nil, &inject.Denial{Reason: inject.ReasonVersionGone, Message: fmt.Sprintf(
			"Secret %s, version %d of instance group '%s' of deployment '%s', was deleted after its gathering wrote it; running pods keep their configuration: gather the deployment again (delete its gathering Job, label %s=%s) to write it anew",
			r.Name, r.Version, group, deployment, names.LabelDeployment, names.LabelValue(deployment))}
	case err != nil:
		return nil, err
	}
	if _, ok := h.verified.Load(s.UID); ok {
		return &s, nil
	}
	if !r.Matches(&s) {
		return nil, &inject.Denial{Reason: inject.ReasonUntrustedSecret, Message: fmt.Sprintf(
			"Secret %s of instance group '%s' of deployment '%s' is not the one its gathering wrote (it was replaced: another object or content): delete it and gather the deployment again",
			r.Name, group, deployment)}
	}
	h.verified.Store(s.UID, true)
	return &s, nil
}

// warnUntrusted reports, once each, the BPM Secrets of a group that carry
// its labels but that no gathering wrote: they are ignored.
func (h *Handler) warnUntrusted(ctx context.Context, req admission.Request, deployment, group string, g trust.Group) {
	var list corev1.SecretList
	if err := h.Cache.List(ctx, &list, client.InNamespace(req.Namespace), client.MatchingLabels{
		names.LabelDeployment:    names.LabelValue(deployment),
		names.LabelInstanceGroup: names.LabelValue(group),
		names.LabelSecretKind:    names.KindBPM,
	}, client.UnsafeDisableDeepCopy); err != nil {
		return
	}
	for i := range list.Items {
		s := &list.Items[i]
		accepted := slices.ContainsFunc(g.Versions, func(v trust.Version) bool { return v.BPM.UID == s.UID })
		if _, done := h.warned.LoadOrStore(s.UID, true); accepted || done {
			continue
		}
		ignored.WithLabelValues(inject.ReasonUntrustedSecret.Code()).Inc()
		h.Log.Info("ignored", "reason", inject.ReasonUntrustedSecret, "namespace", s.Namespace, "secret", s.Name, "deployment", deployment, "instanceGroup", group)
		if h.Recorder != nil && !ptr.Deref(req.DryRun, false) {
			h.Recorder.Eventf(s, nil, corev1.EventTypeWarning, inject.ReasonUntrustedSecret.Code(), "Inject",
				"%s: Secret %s carries the labels of instance group '%s' of deployment '%s', but no gathering of the deployment wrote it; it is ignored",
				inject.ReasonUntrustedSecret, s.Name, group, deployment)
		}
	}
}
