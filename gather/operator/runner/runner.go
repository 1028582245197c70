// Package runner is the operator's job runner: it watches manifest Secrets,
// starts a gathering Job whenever the deployment's inputs (manifest, ops
// files, user-provided variable Secrets) change, reports progress as Events
// and a status annotation on the manifest Secret, and records the accepted
// versions and the update plan there, which package deploy rolls out.
package runner

import (
	"cmp"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/yaml"

	"github.com/bosh-injector/bosh-injector/gather/gathering"
	"github.com/bosh-injector/bosh-injector/gather/gathering/trust"
	"github.com/bosh-injector/bosh-injector/gather/gathering/versions"
	"github.com/bosh-injector/bosh-injector/gather/model/deployment"
	"github.com/bosh-injector/bosh-injector/gather/model/update"
	"github.com/bosh-injector/bosh-injector/gather/names"
	"github.com/bosh-injector/bosh-injector/gather/operator/status"
	"github.com/bosh-injector/bosh-injector/inject"
)

// Release is a release the deployment uses and the image that ships it.
type Release struct {
	Name  string
	Image string
}

// Inputs is what the runner must know of a deployment to gather it.
type Inputs struct {
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
// annotation the runner itself writes, but for a deletion starting and the
// delete-credentials label.
var inputChanged = predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
	oldS, okOld := e.ObjectOld.(*corev1.Secret)
	newS, okNew := e.ObjectNew.(*corev1.Secret)
	return !okOld || !okNew || !maps.EqualFunc(oldS.Data, newS.Data, func(a, b []byte) bool { return string(a) == string(b) }) ||
		newS.DeletionTimestamp != nil || oldS.Labels[names.LabelDeleteCredentials] != newS.Labels[names.LabelDeleteCredentials]
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
		plan, err := gathering.NewPlan(ctx, r.Client, r.Config.TrustNamespace, manifest.Namespace, deployment, inputs.Consumes, inputs.AliasTargets)
		if err != nil {
			return reconcile.Result{}, err
		}
		if err := r.ensureRBAC(ctx, &manifest, deployment, inputs, plan); err != nil {
			return reconcile.Result{}, err
		}
		job := r.gatherJob(&manifest, deployment, jobName, digest, inputs, plan)
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
		rec, refused, err := AcceptReport(ctx, r.uncached(), r.Config.TrustNamespace, manifest.Namespace, deployment, job.UID, *report)
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
		next, err := r.checkExpiry(ctx, &manifest, deployment, time.Now())
		if err != nil {
			return reconcile.Result{}, err
		}
		return reconcile.Result{RequeueAfter: next}, r.setStatus(ctx, &manifest, status.Gathering{State: status.ReasonGathered, Digest: digest, Job: jobName, Versions: latest, BPM: bpmLatest, Plan: inputs.Plan, Regenerations: regenerations})
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

// digest covers every input of a gathering: the manifest, the ops files, the
// variable Secrets the user provided and the links consumed from other
// deployments. Variables bosh-injector generated
// are outputs of gathering, not inputs, so they are left out: including them
// would start a second gathering after every first one. It also returns
// the variables that have no Secret.
func (r *Reconciler) digest(ctx context.Context, manifest *corev1.Secret, ops []deployment.OpsFile, inputs Inputs) (string, []string, error) {
	h := sha256.New()
	write := func(name string, data []byte) {
		fmt.Fprintf(h, "%s\x00%d\x00", name, len(data))
		h.Write(data)
	}
	write(names.ManifestKey, manifest.Data[names.ManifestKey])
	for _, op := range ops {
		write(op.Name, op.Data)
	}
	deployment := manifest.Labels[names.LabelDeployment]
	var missing []string
	for _, v := range slices.Sorted(slices.Values(inputs.Variables)) {
		var s corev1.Secret
		key := types.NamespacedName{Namespace: manifest.Namespace, Name: names.VariableSecret(deployment, v)}
		err := r.Client.Get(ctx, key, &s)
		if apierrors.IsNotFound(err) {
			// The cache holds labelled Secrets only: a user's unlabelled
			// one is read from the API, so that it is never taken for a
			// deleted variable to regenerate.
			err = r.APIReader.Get(ctx, key, &s)
		}
		if apierrors.IsNotFound(err) {
			missing = append(missing, v)
			continue
		}
		if err != nil {
			return "", nil, err
		}
		if s.Labels[names.LabelManagedBy] == names.ManagedBy {
			continue
		}
		for _, k := range slices.Sorted(maps.Keys(s.Data)) {
			write("var/"+v+"/"+k, s.Data[k])
		}
	}
	// A provider's newly accepted link content re-gathers its consumers,
	// and a targeted deployment's newly accepted groups or instances the
	// deployments whose aliases name them: what their plans read.
	for _, in := range []struct {
		deps []string
		path string
		refs func(*trust.Record) map[string]trust.Ref
	}{
		{inputs.Consumes, "link/", func(rec *trust.Record) map[string]trust.Ref { return rec.Links }},
		{inputs.AliasTargets, "bpm/", func(rec *trust.Record) map[string]trust.Ref {
			out := map[string]trust.Ref{}
			for g, group := range rec.Groups {
				if v := group.Latest(); v != nil {
					out[g] = v.BPM
				}
			}
			return out
		}},
	} {
		for _, dep := range in.deps {
			rec, err := trust.Read(ctx, r.Client, r.Config.TrustNamespace, manifest.Namespace, dep)
			if err != nil {
				return "", nil, err
			}
			if rec == nil {
				continue
			}
			refs := in.refs(rec)
			for _, l := range slices.Sorted(maps.Keys(refs)) {
				write(in.path+dep+"/"+l, []byte(refs[l].Name+" "+refs[l].SHA256))
			}
		}
	}
	return hex.EncodeToString(h.Sum(nil)), missing, nil
}

// regenerated is the digest of the n-th gathering of the same inputs started
// to regenerate deleted variables; the first keeps the inputs' digest.
func regenerated(digest string, n int) string {
	if n == 0 {
		return digest
	}
	sum := sha256.Sum256(fmt.Appendf(nil, "%s\x00regeneration\x00%d", digest, n))
	return hex.EncodeToString(sum[:])
}

//go:embed rbac.yaml
var rbacYAML string

// ensureRBAC creates the gathering Job's ServiceAccount, Role and RoleBinding
// from rbac.yaml, owned by the manifest Secret; the Role names the manifest,
// the variable Secrets of inputs and the Secrets plan lets the gathering
// read, and is updated when they change.
func (r *Reconciler) ensureRBAC(ctx context.Context, manifest *corev1.Secret, deployment string, inputs Inputs, plan gathering.Plan) error {
	name := names.DNS1123Label(deployment) + "-gather"
	objects := []client.Object{&corev1.ServiceAccount{}, &rbacv1.Role{}, &rbacv1.RoleBinding{}}
	for i, doc := range strings.Split(rbacYAML, "\n---\n") {
		doc = strings.ReplaceAll(doc, "NAME", name)
		if err := yaml.UnmarshalStrict([]byte(doc), objects[i]); err != nil {
			return fmt.Errorf("rbac.yaml document %d: %w", i+1, err)
		}
		obj := objects[i]
		obj.SetNamespace(manifest.Namespace)
		obj.SetLabels(r.labels(deployment))
		switch o := obj.(type) {
		case *rbacv1.RoleBinding:
			o.Subjects[0].Namespace = manifest.Namespace
		case *rbacv1.Role:
			fillSecretNames(o, manifest.Name, deployment, inputs.Variables, plan.Names())
		}
		if err := controllerutil.SetControllerReference(manifest, obj, r.Client.Scheme()); err != nil {
			return err
		}
		err := r.Client.Create(ctx, obj)
		if role, ok := obj.(*rbacv1.Role); ok && apierrors.IsAlreadyExists(err) {
			err = r.updateRole(ctx, role)
		}
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating %T %s: %w", obj, name, err)
		}
	}
	return nil
}

// fillSecretNames puts the manifest's, the variables' and the other read
// Secrets' names in the Role's rules that name them.
func fillSecretNames(role *rbacv1.Role, manifest, deployment string, variables, reads []string) {
	var vars []string
	for _, v := range variables {
		vars = append(vars, names.VariableSecret(deployment, v))
	}
	slices.Sort(vars)
	filled := map[string][]string{"MANIFEST": {manifest}, "VARIABLES": slices.Compact(vars), "READS": reads}
	var rules []rbacv1.PolicyRule
	for _, rule := range role.Rules {
		if len(rule.ResourceNames) == 1 {
			if want, placeholder := filled[rule.ResourceNames[0]]; placeholder {
				// No names would grant every Secret: a rule without any
				// is left out.
				if len(want) == 0 {
					continue
				}
				rule.ResourceNames = want
			}
		}
		rules = append(rules, rule)
	}
	role.Rules = rules
}

// updateRole brings an existing gathering Role's rules to want's.
func (r *Reconciler) updateRole(ctx context.Context, want *rbacv1.Role) error {
	var have rbacv1.Role
	if err := r.Client.Get(ctx, client.ObjectKeyFromObject(want), &have); err != nil {
		return err
	}
	if equality.Semantic.DeepEqual(have.Rules, want.Rules) {
		return nil
	}
	have.Rules = want.Rules
	return r.Client.Update(ctx, &have)
}

func (r *Reconciler) labels(deployment string) map[string]string {
	return map[string]string{
		names.LabelDeployment: names.LabelValue(deployment),
		names.LabelManagedBy:  names.ManagedBy,
		status.LabelComponent: status.ComponentGather,
	}
}

// DefaultGatherDeadline is far above a gathering's render timeout
// (ruby.DefaultTimeout) and its image pulls.
const DefaultGatherDeadline = 30 * time.Minute

// gatherJob is the gathering Job: one init container per release copies its
// jobs out of the release image, then gather runs in the operator image.
func (r *Reconciler) gatherJob(manifest *corev1.Secret, deployment, name, digest string, inputs Inputs, plan gathering.Plan) *batchv1.Job {
	// The same copy containers as in injected pods.
	const volume = inject.VolumeAllReleases
	var inits []corev1.Container
	for _, rel := range inputs.Releases {
		inits = append(inits, inject.CopyContainer(rel.Name, rel.Image, volume))
	}
	labels := r.labels(deployment)
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: manifest.Namespace, Labels: labels,
			Annotations: map[string]string{names.AnnotationDeploymentName: deployment, annotationDigest: digest},
		},
		Spec: batchv1.JobSpec{
			BackoffLimit:          ptr.To(r.Config.BackoffLimit),
			ActiveDeadlineSeconds: ptr.To(int64(cmp.Or(r.Config.Deadline, DefaultGatherDeadline).Seconds())),
			PodFailurePolicy: &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
				Action: batchv1.PodFailurePolicyActionFailJob,
				OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{
					ContainerName: ptr.To("gather"), Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{status.ExitInvalidInput}},
			}}},
			TTLSecondsAfterFinished: ptr.To(int32(r.Config.JobTTL.Seconds())),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					ServiceAccountName: names.DNS1123Label(deployment) + "-gather",
					// The token reaches the gather container only, never
					// the release images' copy containers.
					AutomountServiceAccountToken: ptr.To(false),
					RestartPolicy:                corev1.RestartPolicyNever,
					InitContainers:               inits,
					Containers: []corev1.Container{{
						Name:  gatherContainer,
						Image: r.Config.OperatorImage,
						Args: []string{"gather",
							"--namespace=" + manifest.Namespace,
							"--manifest-secret=" + manifest.Name,
							"--jobs-dir=" + status.JobsDir,
							"--cluster-domain=" + r.Config.ClusterDomain,
							"--plan=" + plan.String(),
						},
						VolumeMounts: []corev1.VolumeMount{
							{Name: volume, MountPath: inject.AllReleasesDir},
							{Name: tokenVolume, MountPath: tokenDir, ReadOnly: true},
						},
						TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
					}},
					Volumes: []corev1.Volume{
						{Name: volume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
						tokenVolumeSource(),
					},
				},
			},
		},
	}
	_ = controllerutil.SetControllerReference(manifest, job, r.Client.Scheme())
	return job
}

const annotationDigest = names.Prefix + "inputs-digest"

// gatherContainer is the gathering Job's container running gather.
const gatherContainer = "gather"

// The gather container's own ServiceAccount token, mounted where client-go's
// in-cluster configuration reads it.
const (
	tokenVolume = "gather-token"
	tokenDir    = "/var/run/secrets/kubernetes.io/serviceaccount"
)

// tokenVolumeSource is what the kubelet's automount would mount: a
// short-lived token, the cluster CA and the namespace.
func tokenVolumeSource() corev1.Volume {
	return corev1.Volume{Name: tokenVolume, VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		DefaultMode: ptr.To[int32](0o444),
		Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To[int64](3607)}},
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"},
				Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
			{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{
				{Path: "namespace", FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}},
		},
	}}}
}

// opsFiles are a manifest Secret's ops files; Reconcile's deployment
// variable shadows the package.
func opsFiles(s *corev1.Secret) []deployment.OpsFile { return deployment.OpsFilesOf(s.Data) }

// terminationMessage returns why job failed: its deadline, or the gather
// container's termination message (the director-format error list) of the
// Job's last failed pod.
func (r *Reconciler) terminationMessage(ctx context.Context, job *batchv1.Job) string {
	for _, c := range job.Status.Conditions {
		if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue && c.Reason == batchv1.JobReasonDeadlineExceeded && job.Spec.ActiveDeadlineSeconds != nil {
			return fmt.Sprintf("gathering Job %s exceeded its deadline of %s (activeDeadlineSeconds) and was stopped", job.Name, time.Duration(*job.Spec.ActiveDeadlineSeconds)*time.Second)
		}
	}
	var pods corev1.PodList
	if err := r.APIReader.List(ctx, &pods, client.InNamespace(job.Namespace), client.MatchingLabels{"batch.kubernetes.io/job-name": job.Name}); err != nil {
		return "gathering failed; its pods could not be read: " + err.Error()
	}
	slices.SortFunc(pods.Items, func(a, b corev1.Pod) int { return a.CreationTimestamp.Compare(b.CreationTimestamp.Time) })
	for i := len(pods.Items) - 1; i >= 0; i-- {
		for _, cs := range append(pods.Items[i].Status.InitContainerStatuses, pods.Items[i].Status.ContainerStatuses...) {
			if t := cs.State.Terminated; t != nil && t.ExitCode != 0 && t.Message != "" {
				return strings.TrimSpace(t.Message)
			}
		}
	}
	return "gathering failed; see the logs of Job " + job.Name
}

// created says whether the runner created job, as the record in its own
// namespace says. A Job of the same name that anyone else created is
// deleted, with a warning Event; the runner creates its own once it is gone.
func (r *Reconciler) created(ctx context.Context, manifest *corev1.Secret, deployment string, job *batchv1.Job) (bool, error) {
	// The cache may not hold yet a Job recorded just now.
	for _, reader := range []client.Reader{r.Client, r.APIReader} {
		rec, err := trust.Read(ctx, reader, r.Config.TrustNamespace, manifest.Namespace, deployment)
		if err != nil {
			return false, err
		}
		if rec.Created(job.Name, job.UID) {
			return true, nil
		}
	}
	if job.DeletionTimestamp != nil {
		return false, nil
	}
	r.Log.Info("deleting a gathering Job the operator did not create", "reason", status.ReasonForeignJob, "namespace", job.Namespace, "job", job.Name)
	r.Recorder.Eventf(manifest, job, corev1.EventTypeWarning, status.ReasonForeignJob, "Gather",
		"Job %s was not created by the operator, which ignores its result: deleting it to run its own gathering", job.Name)
	err := r.Client.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground), client.Preconditions{UID: &job.UID})
	return false, client.IgnoreNotFound(err)
}

// report is what the Job's gather container reported in its termination
// message on success: the versions the webhook may inject (package trust).
// Only a pod the Job controls and that runs the Job's own containers
// reports: anyone who may create pods can make one naming the Job as its
// controller.
func (r *Reconciler) report(ctx context.Context, job *batchv1.Job) (*trust.Report, error) {
	var pods corev1.PodList
	if err := r.APIReader.List(ctx, &pods, client.InNamespace(job.Namespace), client.MatchingLabels{"batch.kubernetes.io/job-name": job.Name}); err != nil {
		return &trust.Report{}, fmt.Errorf("reading the pods of Job %s: %w", job.Name, err)
	}
	for _, p := range pods.Items {
		if !metav1.IsControlledBy(&p, job) || !fromTemplate(&p, &job.Spec.Template.Spec) {
			continue
		}
		for _, cs := range p.Status.ContainerStatuses {
			if t := cs.State.Terminated; cs.Name == gatherContainer && t != nil && t.ExitCode == 0 && t.Message != "" {
				report, err := trust.ParseReport(t.Message)
				return &report, err
			}
		}
	}
	return &trust.Report{}, fmt.Errorf("no pod of Job %s reports the versions it wrote", job.Name)
}

// fromTemplate says whether pod runs the containers of template, with the
// same programs, arguments, environment and volumes.
func fromTemplate(pod *corev1.Pod, template *corev1.PodSpec) bool {
	same := func(have, want []corev1.Container) bool {
		return slices.EqualFunc(have, want, func(h, w corev1.Container) bool {
			return h.Name == w.Name && h.Image == w.Image && slices.Equal(h.Command, w.Command) && slices.Equal(h.Args, w.Args) &&
				h.WorkingDir == w.WorkingDir && equality.Semantic.DeepEqual(h.Env, w.Env) && equality.Semantic.DeepEqual(h.EnvFrom, w.EnvFrom) &&
				equality.Semantic.DeepEqual(h.VolumeMounts, w.VolumeMounts)
		})
	}
	if !same(pod.Spec.InitContainers, template.InitContainers) || !same(pod.Spec.Containers, template.Containers) {
		return false
	}
	for _, want := range template.Volumes {
		i := slices.IndexFunc(pod.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == want.Name })
		if i < 0 || !equality.Semantic.DeepEqual(pod.Spec.Volumes[i].VolumeSource, want.VolumeSource) {
			return false
		}
	}
	return true
}

// AcceptReport accepts a gathering's report as the job runner does when
// its Job succeeded (trust.AcceptReport: the groups' versions and the links
// the deployment shares now), deleting every version of the links it no
// longer shares (their consumers must not keep resolving them). A Job
// without a report accepts nothing new. It returns the record and why
// anything reported was refused.
func AcceptReport(ctx context.Context, c client.Client, trustNamespace, namespace, deployment string, job types.UID, report trust.Report) (*trust.Record, []string, error) {
	rec, stored, refused, err := trust.AcceptReport(ctx, c, trustNamespace, namespace, deployment, job, report)
	if err != nil || report.Groups == nil {
		return rec, refused, err
	}
	for _, s := range stored.Series() {
		l := s[0].Secret.Labels
		if _, shared := report.Links[l[names.LabelInstanceGroup]]; shared || l[names.LabelSecretKind] != names.KindLink {
			continue
		}
		for _, v := range s {
			if err := c.Delete(ctx, v.Secret, client.Preconditions{UID: &v.Secret.UID}); client.IgnoreNotFound(err) != nil {
				return rec, refused, fmt.Errorf("deleting Secret %s of a link no longer shared: %w", v.Secret.Name, err)
			}
		}
	}
	return rec, refused, nil
}

// prune deletes the deployment's old versions, which the gathering may not
// list or delete. Of a group's or link's series, the versions above its
// latest accepted one (of a gathering not accepted yet, or forged) are
// neither deleted nor counted, so they never push an accepted version out.
func (r *Reconciler) prune(ctx context.Context, namespace, deployment string, rec *trust.Record) error {
	stored, err := versions.ListDeployment(ctx, r.Client, namespace, deployment)
	if err != nil {
		return err
	}
	var series [][]versions.Version
	for _, s := range stored.Series() {
		l := s[0].Secret.Labels
		label := l[names.LabelInstanceGroup]
		var latest int
		switch l[names.LabelSecretKind] {
		case names.KindLink:
			ref, ok := rec.Links[label]
			if !ok {
				continue
			}
			latest = ref.Version
		case names.KindBPM, names.KindResolved:
			g, ok := rec.Groups[label]
			if !ok {
				continue
			}
			latest = g.Latest().BPM.Version
			if l[names.LabelSecretKind] == names.KindResolved {
				latest = g.Latest().Resolved.Version
			}
		default:
			continue
		}
		series = append(series, slices.DeleteFunc(slices.Clone(s), func(v versions.Version) bool { return v.Number > latest }))
	}
	deleted, err := versions.Prune(ctx, r.uncached(), namespace, deployment, series...)
	if len(deleted) > 0 {
		r.Log.Info("pruned old versions", "namespace", namespace, "deployment", deployment, "secrets", deleted)
	}
	return err
}

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

// setStatus records st in the manifest Secret's status annotation and state
// label, stamping the time of the change.
func (r *Reconciler) setStatus(ctx context.Context, manifest *corev1.Secret, st status.Gathering) error {
	r.metrics.state(manifest, st.State)
	// The versions in use stay those of the last good gathering until
	// another one succeeds.
	if st.Versions == nil {
		st.Versions, st.Plan = status.GatheringOf(manifest).Versions, status.GatheringOf(manifest).Plan
	}
	if status.GatheringOf(manifest).Same(st) && manifest.Labels[names.LabelState] == status.StateOf(st.State) {
		return nil
	}
	st.LastChange = time.Now().UTC().Format(time.RFC3339)
	data, err := json.Marshal(st)
	if err != nil {
		return err
	}
	patch := client.MergeFrom(manifest.DeepCopy())
	if manifest.Annotations == nil {
		manifest.Annotations = map[string]string{}
	}
	manifest.Annotations[names.AnnotationStatus] = string(data)
	manifest.Labels[names.LabelState] = status.StateOf(st.State)
	return r.Client.Patch(ctx, manifest, patch)
}

// removeOldJobs deletes the deployment's other gathering Jobs once a newer
// one succeeded; the TTL removes the last one in time.
func (r *Reconciler) removeOldJobs(ctx context.Context, manifest *corev1.Secret, deployment, keep string) error {
	var jobs batchv1.JobList
	if err := r.Client.List(ctx, &jobs, client.InNamespace(manifest.Namespace), client.MatchingLabels(r.labels(deployment))); err != nil {
		return err
	}
	for i := range jobs.Items {
		j := &jobs.Items[i]
		if j.Name == keep || !metav1.IsControlledBy(j, manifest) {
			continue
		}
		if err := r.Client.Delete(ctx, j, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("removing old gathering Job %s: %w", j.Name, err)
		}
	}
	return nil
}
