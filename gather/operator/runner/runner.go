// Package runner is the operator's job runner: it watches manifest Secrets,
// starts a gathering Job whenever the deployment's inputs (manifest, ops
// files, user-provided variable Secrets) change, reports progress as Events
// and a status annotation on the manifest Secret, and records the accepted
// versions and the update plan there, which the rollout controller (gather/operator/rollout) rolls out.
package runner

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/go-logr/logr"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/bosh-injector/bosh-injector/gather/gathering"
	"github.com/bosh-injector/bosh-injector/gather/gathering/trust"
	"github.com/bosh-injector/bosh-injector/gather/model/deployment"
	"github.com/bosh-injector/bosh-injector/gather/model/update"
	"github.com/bosh-injector/bosh-injector/gather/names"
	"github.com/bosh-injector/bosh-injector/gather/operator/status"
)

// Release is a release the deployment uses and the image that ships it.
type Release struct {
	Name  string
	Image string
}

// Inputs is what the runner must know of a deployment to gather it.
type Inputs struct {
	// Name is the manifest's name: the deployment's name on the config
	// server.
	Name     string
	Releases []Release
	// Variables are the names of the variables the manifest references;
	// user-provided Secrets of those names are part of the inputs.
	Variables []string
	// Consumes are the other deployments of the namespace whose shared
	// links the manifest consumes; their content is part of the inputs.
	Consumes []string
	// AliasTargets are the other deployments of the namespace its DNS
	// aliases target; their groups' BPM info (instance counts) is part of
	// the inputs.
	AliasTargets []string
	// Plan is how a deploy updates the instance groups: their order and
	// update blocks.
	Plan update.Plan
}

// Config is the runner's configuration.
type Config struct {
	// OperatorImage runs the gather container.
	OperatorImage string
	ClusterDomain string
	// JobTTL is how long a finished gathering Job is kept.
	JobTTL time.Duration
	// BackoffLimit is how often a failed gathering is retried.
	BackoffLimit int32
	// Deadline bounds a gathering Job, retries included (0:
	// DefaultGatherDeadline): the job controller stops it then, and the
	// deployment's status says so.
	Deadline time.Duration
	// TrustNamespace is the operator's namespace, where the runner records
	// the versions each successful gathering wrote (package trust): the
	// webhook injects only those.
	TrustNamespace string
	// ConfigServer is where gatherings read and generate variables.
	ConfigServer ConfigServer
}

// Reconciler runs gathering Jobs for manifest Secrets.
type Reconciler struct {
	Client client.Client
	// APIReader reads what the manager does not cache (the pods of
	// gathering Jobs).
	APIReader client.Reader
	Recorder  events.EventRecorder
	Config    Config
	Log       logr.Logger

	metrics stateMetrics
}

// SetupWithManager registers the runner with mgr. Controllers are leader
// elected by the manager, so two operator replicas never both create Jobs.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := mgr.Add(r.forgetDeletedAtStart()); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("gather-runner").
		For(&corev1.Secret{}, builder.WithPredicates(predicate.NewPredicateFuncs(status.IsManifest), inputChanged)).
		Owns(&batchv1.Job{}).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.manifestsOfVariable),
			builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool { return isVariable(o) }))).
		Watches(&corev1.ConfigMap{}, handler.EnqueueRequestsFromMapFunc(r.manifestsConsuming),
			builder.WithPredicates(predicate.NewPredicateFuncs(r.isRecord))).
		Complete(r)
}

// inputChanged ignores updates that touch only metadata, such as the status
// annotation the runner itself writes, but for a deletion starting, the
// delete-credentials label and the redeploy annotation.
var inputChanged = predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
	oldS, okOld := e.ObjectOld.(*corev1.Secret)
	newS, okNew := e.ObjectNew.(*corev1.Secret)
	return !okOld || !okNew || !maps.EqualFunc(oldS.Data, newS.Data, func(a, b []byte) bool { return string(a) == string(b) }) ||
		newS.DeletionTimestamp != nil || oldS.Labels[names.LabelDeleteCredentials] != newS.Labels[names.LabelDeleteCredentials] ||
		oldS.Annotations[names.AnnotationRedeploy] != newS.Annotations[names.AnnotationRedeploy]
}}

// isVariable is true of a deployment's variable Secret; users label theirs
// with the deployment too (the operator caches only labelled Secrets).
func isVariable(o client.Object) bool {
	return o.GetLabels()[names.LabelDeployment] != "" && strings.Contains(o.GetName(), ".var-")
}

// manifestsOfVariable maps a variable Secret to its deployment's manifest
// Secrets.
func (r *Reconciler) manifestsOfVariable(ctx context.Context, o client.Object) []reconcile.Request {
	reqs, err := status.ManifestRequests(ctx, r.Client, o.GetNamespace(), o.GetLabels()[names.LabelDeployment])
	if err != nil {
		r.Log.Error(err, "listing manifest Secrets")
	}
	return reqs
}

// Reconcile brings one manifest Secret's gathering up to date.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	// The manifest is read from the API: the status it holds decides which
	// Job is current, and a stale one would take a Job just started for
	// an old one (and remove it).
	var manifest corev1.Secret
	if err := r.APIReader.Get(ctx, req.NamespacedName, &manifest); err != nil {
		// A deleted manifest's objects are owned by it: the garbage
		// collector removes them, the user's workloads are not touched.
		// Generated variables are not: credentials outlive the manifest.
		if apierrors.IsNotFound(err) {
			r.metrics.forget(req.NamespacedName)
			lastSuccess.DeletePartialMatch(map[string]string{"namespace": req.Namespace})
			certificateExpiry.DeletePartialMatch(map[string]string{"namespace": req.Namespace})
			return reconcile.Result{}, r.forgetDeleted(ctx, req.Namespace)
		}
		return reconcile.Result{}, err
	}
	if !status.IsManifest(&manifest) {
		return reconcile.Result{}, nil
	}
	deployment := manifest.Labels[names.LabelDeployment]
	if deleted, err := r.credentials(ctx, &manifest, deployment); deleted || err != nil {
		return reconcile.Result{}, err
	}
	log := r.Log.WithValues("namespace", manifest.Namespace, "deployment", deployment)

	ops := opsFiles(&manifest)
	prev := status.GatheringOf(&manifest)
	inputs, err := Inspect(manifest.Data[names.ManifestKey], ops)
	if err != nil {
		st := status.Gathering{State: status.ReasonInvalidManifest, Message: err.Error(), Regenerations: prev.Regenerations}
		if !status.GatheringOf(&manifest).Same(st) {
			log.Info("manifest rejected", "reason", status.ReasonInvalidManifest, "error", err.Error())
			r.Recorder.Eventf(&manifest, nil, corev1.EventTypeWarning, status.ReasonInvalidManifest, "Inspect", "%s", err.Error())
			finished(&manifest, status.ReasonInvalidManifest, nil)
		}
		return reconcile.Result{}, r.setStatus(ctx, &manifest, st)
	}
	digest, missing, err := r.digest(ctx, &manifest, ops, inputs)
	if err != nil {
		return reconcile.Result{}, err
	}
	// A variable missing after the gathering of these very inputs
	// succeeded was deleted since: gather again to regenerate it (rotation).
	regenerations := prev.Regenerations
	if len(missing) > 0 && prev.State == status.ReasonGathered && prev.Digest == regenerated(digest, regenerations) {
		regenerations++
		log.Info("regenerating deleted variables", "variables", missing)
		r.Recorder.Eventf(&manifest, nil, corev1.EventTypeNormal, status.ReasonRegenerating, "Gather", "variable Secrets deleted, gathering again to regenerate them: %s", strings.Join(missing, ", "))
	}
	digest = regenerated(digest, regenerations)
	jobName := fmt.Sprintf("%s-gather-%s", names.DNS1123Label(deployment), digest[:10])

	var job batchv1.Job
	err = r.Client.Get(ctx, types.NamespacedName{Namespace: manifest.Namespace, Name: jobName}, &job)
	switch {
	case apierrors.IsNotFound(err):
		plan, err := gathering.NewPlan(ctx, r.Client, r.Config.TrustNamespace, manifest.Namespace, deployment, digest, inputs.Consumes, inputs.AliasTargets)
		if err != nil {
			return reconcile.Result{}, err
		}
		if plan.Import, err = r.importable(ctx, &manifest, deployment, inputs); err != nil {
			return reconcile.Result{}, err
		}
		if err := r.ensureRBAC(ctx, &manifest, deployment, inputs, plan); err != nil {
			return reconcile.Result{}, err
		}
		if err := r.ensureClientSecret(ctx, &manifest, deployment); err != nil {
			return reconcile.Result{}, err
		}
		job, err := r.gatherJob(&manifest, deployment, jobName, digest, inputs, plan)
		if err != nil {
			return reconcile.Result{}, err
		}
		if err := r.Client.Create(ctx, job); err != nil {
			// One of the same name created meanwhile is checked next time.
			return reconcile.Result{}, fmt.Errorf("creating gathering Job %s: %w", jobName, err)
		}
		if err := trust.RecordJob(ctx, r.uncached(), r.Config.TrustNamespace, manifest.Namespace, deployment, jobName, job.UID); err != nil {
			return reconcile.Result{}, err
		}
		log.Info("gathering", "job", jobName)
		r.Recorder.Eventf(&manifest, job, corev1.EventTypeNormal, status.ReasonGatherStarted, "Gather", "started gathering Job %s", jobName)
		return reconcile.Result{}, r.setStatus(ctx, &manifest, status.Gathering{State: status.ReasonGatherStarted, Digest: digest, Job: jobName, Regenerations: regenerations})
	case err != nil:
		return reconcile.Result{}, err
	}
	if created, err := r.created(ctx, &manifest, deployment, &job); !created || err != nil {
		return reconcile.Result{RequeueAfter: time.Second}, err
	}

	switch {
	case status.JobCondition(&job, batchv1.JobComplete):
		if status.GatheringOf(&manifest).State != status.ReasonGathered || status.GatheringOf(&manifest).Digest != digest {
			log.Info("gathered", "job", jobName)
			r.Recorder.Eventf(&manifest, &job, corev1.EventTypeNormal, status.ReasonGathered, "Gather", "gathering Job %s succeeded", jobName)
			finished(&manifest, status.ReasonGathered, &job)
		}
		notAccepted := func(why string) {
			log.Info("versions not accepted", "reason", status.ReasonNotAccepted, "job", jobName, "error", why)
			r.Recorder.Eventf(&manifest, &job, corev1.EventTypeWarning, status.ReasonNotAccepted, "Accept",
				"gathering Job %s succeeded, but its versions cannot be accepted: %s; pods keep being injected from the versions accepted before", jobName, why)
		}
		report, err := r.report(ctx, &job)
		if err != nil {
			notAccepted(err.Error())
		}
		// A Job's report is accepted once: read from the API.
		rec, refused, err := AcceptReport(ctx, r.uncached(), r.Config.TrustNamespace, manifest.Namespace, deployment, job.UID, job.Annotations[annotationDigest], *report)
		if err != nil {
			return reconcile.Result{}, err
		}
		if len(refused) > 0 {
			notAccepted(strings.Join(refused, "; "))
		}
		if err := r.prune(ctx, manifest.Namespace, deployment, rec); err != nil {
			return reconcile.Result{}, err
		}
		latest, bpmLatest := map[string]int{}, map[string]int{}
		for label, g := range rec.Groups {
			latest[label], bpmLatest[label] = g.Latest().Resolved.Version, g.Latest().BPM.Version
		}
		if err := r.removeOldJobs(ctx, &manifest, deployment, jobName); err != nil {
			return reconcile.Result{}, err
		}
		next, err := r.checkExpiry(ctx, &manifest, deployment, rec, time.Now())
		if err != nil {
			return reconcile.Result{}, err
		}
		var set string
		if rec.VariableSet != nil {
			set = rec.VariableSet.Name
		}
		return reconcile.Result{RequeueAfter: next}, r.setStatus(ctx, &manifest, status.Gathering{State: status.ReasonGathered, Digest: digest, Job: jobName, Versions: latest, BPM: bpmLatest, Plan: inputs.Plan, Regenerations: regenerations, VariableSet: set})
	case status.JobCondition(&job, batchv1.JobFailed):
		message := r.terminationMessage(ctx, &job)
		if status.GatheringOf(&manifest).State != status.ReasonGatherFailed || status.GatheringOf(&manifest).Digest != digest {
			log.Info("gathering failed", "job", jobName, "reason", status.ReasonGatherFailed)
			r.Recorder.Eventf(&manifest, &job, corev1.EventTypeWarning, status.ReasonGatherFailed, "Gather", "gathering Job %s failed: %s", jobName, message)
			finished(&manifest, status.ReasonGatherFailed, &job)
		}
		return reconcile.Result{}, r.setStatus(ctx, &manifest, status.Gathering{State: status.ReasonGatherFailed, Digest: digest, Job: jobName, Message: message, Regenerations: regenerations})
	}
	return reconcile.Result{}, nil
}

// opsFiles are a manifest Secret's ops files; Reconcile's deployment
// variable shadows the package.
func opsFiles(s *corev1.Secret) []deployment.OpsFile { return deployment.OpsFilesOf(s.Data) }

// uncached reads from the API: the manager caches no pods, and its cache
// may not hold yet the Secrets a gathering just wrote, or the record the
// runner just wrote.
type uncached struct {
	client.Client
	reader client.Reader
}

func (r *Reconciler) uncached() client.Client { return uncached{r.Client, r.APIReader} }

func (u uncached) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	return u.reader.Get(ctx, key, obj, opts...)
}

func (u uncached) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return u.reader.List(ctx, list, opts...)
}
