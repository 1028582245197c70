// Package webhook is the admission webhook that injects BOSH instances into
// labelled pods at creation, and the operator process around it (the
// manager that also runs the gathering job runner).
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
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	kjson "sigs.k8s.io/json"

	"github.com/bosh-injector/bosh-injector/gather/bpm"
	"github.com/bosh-injector/bosh-injector/gather/names"
	"github.com/bosh-injector/bosh-injector/gather/secretdata"
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
	latency = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "bosh_injector_admission_duration_seconds", Help: "Time to handle a pod admission request.",
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
	})
)

func init() { metrics.Registry.MustRegister(requests, denials, latency) }

// Handler injects pods. Cache must hold the Secrets labelled with a
// deployment (see Run): every admission is answered from it, without an API
// call.
type Handler struct {
	Cache             client.Reader
	Settings          inject.Settings
	OperatorNamespace string
	Log               logr.Logger

	// decoded holds decoded BPM info by Secret UID: versioned Secrets are
	// immutable, so a decoded version never changes.
	decoded sync.Map
}

// Handle implements admission.Handler.
func (h *Handler) Handle(ctx context.Context, req admission.Request) admission.Response {
	start := time.Now()
	defer func() { latency.Observe(time.Since(start).Seconds()) }()

	// Decoded as the API server does (case sensitive), and without
	// duplicate keys, so the patch's paths are the request's members.
	var pod corev1.Pod
	strict, err := kjson.UnmarshalStrict(req.Object.Raw, &pod, kjson.DisallowDuplicateFields)
	if err == nil && len(strict) > 0 {
		err = errors.Join(strict...)
	}
	if err != nil {
		requests.WithLabelValues("error").Inc()
		h.Log.Info("denied", "namespace", req.Namespace, "reason", inject.ReasonInvalidPod, "error", err.Error())
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("%s: %w", inject.ReasonInvalidPod, err))
	}
	log := h.Log.WithValues("namespace", req.Namespace, "generateName", pod.GenerateName, "name", pod.Name)
	ig := pod.Labels[names.LabelInstanceGroup]
	switch {
	case ig == "":
		return h.skip(log, inject.ReasonNotLabelled)
	case req.Namespace == h.OperatorNamespace:
		return h.skip(log, inject.ReasonOperatorNamespace)
	}
	deployment := pod.Labels[names.LabelDeployment]
	info, err := h.info(ctx, req.Namespace, deployment, ig)
	var inst inject.Instance
	if err == nil {
		inst, err = inject.InstanceOf(&pod, info)
	}
	var patch []byte
	if err == nil {
		// Mutate changes the pod in place; the patch is the difference.
		before := pod.DeepCopy()
		if err = inject.Mutate(&pod, inject.Plan{Info: info, Instance: inst, Settings: h.Settings, Namespace: cmp.Or(pod.Namespace, req.Namespace)}); err == nil {
			patch, err = podPatch(before, &pod)
		}
	}
	var denial *inject.Denial
	if errors.As(err, &denial) {
		requests.WithLabelValues("denied").Inc()
		denials.WithLabelValues(denial.Reason.Code()).Inc()
		log.Info("denied", "reason", denial.Reason, "message", denial.Message)
		return admission.Denied(denial.Error())
	}
	if err != nil {
		requests.WithLabelValues("error").Inc()
		log.Error(err, "injection failed")
		return admission.Errored(http.StatusInternalServerError, err)
	}
	requests.WithLabelValues("injected").Inc()
	log.V(1).Info("injected", "deployment", deployment, "instanceGroup", ig, "index", inst.Index, "resolved", info.ResolvedSecret)
	resp := patched(patch)
	resp.Warnings = inject.Warnings(info, inst.Index)
	return resp
}

func (h *Handler) skip(log logr.Logger, r inject.Reason) admission.Response {
	requests.WithLabelValues("skipped").Inc()
	log.V(1).Info("skipped", "reason", r)
	return admission.Allowed(string(r))
}

// info returns the latest BPM info of an instance group from the cache.
// Pods carry BOSH names as users wrote them; Secrets carry them sanitized.
func (h *Handler) info(ctx context.Context, namespace, deployment, group string) (*bpm.Info, error) {
	var list corev1.SecretList
	// The Secrets are only read here, so the cache need not copy them.
	if err := h.Cache.List(ctx, &list, client.InNamespace(namespace), client.MatchingLabels{
		names.LabelDeployment: names.LabelValue(deployment),
		names.LabelSecretKind: names.KindBPM,
	}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	var latest *corev1.Secret
	latestVersion := 0
	var groups []string
	for i := range list.Items {
		s := &list.Items[i]
		g := s.Labels[names.LabelInstanceGroup]
		if !slices.Contains(groups, s.Annotations[names.AnnotationInstanceGroupName]) {
			groups = append(groups, s.Annotations[names.AnnotationInstanceGroupName])
		}
		v, err := strconv.Atoi(s.Labels[names.LabelVersion])
		if g == names.LabelValue(group) && err == nil && v > latestVersion {
			latest, latestVersion = s, v
		}
	}
	switch {
	case latest != nil:
	case len(groups) == 0:
		return nil, &inject.Denial{Reason: inject.ReasonNotGathered, Message: fmt.Sprintf(
			"deployment '%s' has not been gathered in namespace %s yet: create its manifest Secret (label %s=%s, key %s) and wait for its gathering Job; pods are retried",
			deployment, namespace, names.LabelDeployment, deployment, names.ManifestKey)}
	default:
		slices.Sort(groups)
		return nil, &inject.Denial{Reason: inject.ReasonUnknownGroup, Message: fmt.Sprintf(
			"deployment '%s' has no instance group '%s'; its instance groups are %v: fix the pod template's label %s",
			deployment, group, groups, names.LabelInstanceGroup)}
	}
	if info, ok := h.decoded.Load(latest.UID); ok {
		return info.(*bpm.Info), nil
	}
	var info bpm.Info
	if err := secretdata.Decode(latest.Data[bpm.InfoKey], &info); err != nil {
		return nil, fmt.Errorf("reading %s: %w", latest.Name, err)
	}
	h.decoded.Store(latest.UID, &info)
	return &info, nil
}
