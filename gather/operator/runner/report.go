package runner

import (
	"context"
	"fmt"
	"slices"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bosh-injector/bosh-injector/gather/gathering/trust"
	"github.com/bosh-injector/bosh-injector/gather/gathering/versions"
	"github.com/bosh-injector/bosh-injector/gather/names"
)

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
func AcceptReport(ctx context.Context, c client.Client, trustNamespace, namespace, deployment string, job types.UID, digest string, report trust.Report) (*trust.Record, []string, error) {
	rec, stored, refused, err := trust.AcceptReport(ctx, c, trustNamespace, namespace, deployment, job, digest, report)
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
		case names.KindVariableSet:
			if rec.VariableSet == nil {
				continue
			}
			latest = rec.VariableSet.Version
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
