package runner

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/bosh-injector/bosh-injector/gather/gathering"
	"github.com/bosh-injector/bosh-injector/gather/gathering/trust"
	"github.com/bosh-injector/bosh-injector/gather/names"
	"github.com/bosh-injector/bosh-injector/gather/operator/status"
	"github.com/bosh-injector/bosh-injector/inject"
)

// DefaultGatherDeadline is far above a gathering's render timeout
// (ruby.DefaultTimeout) and its image pulls.
const DefaultGatherDeadline = 30 * time.Minute

// gatherJob is the gathering Job: one init container per release copies its
// jobs out of the release image, then gather runs in the operator image.
func (r *Reconciler) gatherJob(manifest *corev1.Secret, deployment, name, digest string, inputs Inputs, plan gathering.Plan) (*batchv1.Job, error) {
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
	if err := r.Config.ConfigServer.access(&job.Spec.Template.Spec, manifest.Namespace, deployment, inputs.Name); err != nil {
		return nil, err
	}
	_ = controllerutil.SetControllerReference(manifest, job, r.Client.Scheme())
	return job, nil
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

// labels mark the objects the runner creates for a deployment: its
// gathering Jobs and their RBAC.
func (r *Reconciler) labels(deployment string) map[string]string {
	return map[string]string{
		names.LabelDeployment: names.LabelValue(deployment),
		names.LabelManagedBy:  names.ManagedBy,
		status.LabelComponent: status.ComponentGather,
	}
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
