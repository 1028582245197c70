package day2

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bosh-injector/bosh-injector/gather/client/cluster"
	"github.com/bosh-injector/bosh-injector/gather/names"
	"github.com/bosh-injector/bosh-injector/gather/operator/orphan"
	"github.com/bosh-injector/bosh-injector/gather/operator/podstate"
	"github.com/bosh-injector/bosh-injector/inject/runtime/contract"
)

// DeleteOptions are `delete-deployment`'s flags and output.
type DeleteOptions struct {
	// Force goes on when an instance's pre-stop or drain fails.
	Force bool
	// DeleteVariables deletes the generated variable Secrets too; without
	// it they stay, as a director's config server keeps credentials.
	DeleteVariables bool
	Out             io.Writer
	// Timeout bounds the wait for the pods to drain and go.
	Timeout time.Duration
}

// Delete deletes the deployment as `bosh delete-deployment` does: every
// instance drained (drainAll), the manifest Secret, the StatefulSets and
// Jobs, waiting for the pods to go; the persistent disk claims stay,
// orphaned by the operator's disk controller (reportOrphans); then the
// groups' PodDisruptionBudgets and every object gathering made (resolved
// and BPM Secrets, links, Services, DNS records, the gathering's Jobs and
// RBAC), and the generated variables when asked.
func (d *Deployment) Delete(ctx context.Context, o DeleteOptions) error {
	ns := client.InNamespace(d.Namespace)
	label := names.LabelValue(d.Name())
	ofDeployment := func(t corev1.PodTemplateSpec) bool { return t.Labels[names.LabelDeployment] == label }

	var sets appsv1.StatefulSetList
	if err := d.Client.List(ctx, &sets, ns); err != nil {
		return err
	}
	sets.Items = slices.DeleteFunc(sets.Items, func(s appsv1.StatefulSet) bool { return !ofDeployment(s.Spec.Template) })
	var jobs batchv1.JobList
	if err := d.Client.List(ctx, &jobs, ns); err != nil {
		return err
	}
	if err := d.drainAll(ctx, o); err != nil {
		return err
	}
	// The manifest goes first: the operator then starts no gathering and
	// no deploy for it while the rest goes.
	if err := d.Client.Delete(ctx, d.Secret); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting the manifest Secret %s: %w", d.Secret.Name, err)
	}
	background := client.PropagationPolicy(metav1.DeletePropagationBackground)
	for i := range sets.Items {
		if err := d.Client.Delete(ctx, &sets.Items[i], background); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting StatefulSet %s: %w", sets.Items[i].Name, err)
		}
		fmt.Fprintf(o.Out, "Deleting instances of StatefulSet %s (draining)\n", sets.Items[i].Name)
	}
	for i := range jobs.Items {
		j := &jobs.Items[i]
		if ofDeployment(j.Spec.Template) || j.Labels[names.LabelDeployment] == label {
			if err := d.Client.Delete(ctx, j, background); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("deleting Job %s: %w", j.Name, err)
			}
		}
	}
	if err := d.waitPodsGone(ctx, o.Timeout); err != nil {
		return err
	}

	d.reportOrphans(ctx, o)

	// The groups' PodDisruptionBudgets: `objects` labels them; those it
	// printed before it did are the ones selecting the deployment's pods.
	var budgets policyv1.PodDisruptionBudgetList
	if err := d.Client.List(ctx, &budgets, ns); err != nil {
		return err
	}
	for i := range budgets.Items {
		b := &budgets.Items[i]
		if b.Labels[names.LabelDeployment] != label && (b.Spec.Selector == nil || b.Spec.Selector.MatchLabels[names.LabelDeployment] != label) {
			continue
		}
		if err := d.Client.Delete(ctx, b); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting PodDisruptionBudget %s: %w", b.Name, err)
		}
	}

	for _, list := range []client.ObjectList{&corev1.SecretList{}, &corev1.ConfigMapList{}, &corev1.ServiceList{}, &batchv1.JobList{},
		&corev1.PodList{}, &corev1.ServiceAccountList{}, &rbacv1.RoleList{}, &rbacv1.RoleBindingList{}} {
		if err := d.Client.List(ctx, list, ns, client.MatchingLabels{names.LabelDeployment: label}); err != nil {
			return err
		}
		items, err := apimeta.ExtractList(list)
		if err != nil {
			return err
		}
		for _, item := range items {
			obj := item.(client.Object)
			if obj.GetLabels()[names.LabelSecretKind] == names.KindVariable && !o.DeleteVariables {
				continue
			}
			if err := d.Client.Delete(ctx, obj, background); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("deleting %T %s: %w", obj, obj.GetName(), err)
			}
		}
	}
	fmt.Fprintf(o.Out, "Deleted deployment '%s'\n", d.Name())
	return nil
}

// orphanWait bounds the wait for the disk controller's marks.
const orphanWait = 30 * time.Second

// reportOrphans reports the deployment's claims as the director reports
// the disks it orphans, once the operator's disk controller has orphaned
// them (gather/operator/disks: a claim no pod of a StatefulSet mounts any
// more gets names.LabelOrphaned and the instance it was of); the
// controller alone marks them. A claim still unmarked after orphanWait is
// a warning: the controller marks it when it runs.
func (d *Deployment) reportOrphans(ctx context.Context, o DeleteOptions) {
	ctx, cancel := context.WithTimeout(ctx, orphanWait)
	defer cancel()
	var claims corev1.PersistentVolumeClaimList
	for ctx.Err() == nil {
		err := d.Client.List(ctx, &claims, client.InNamespace(d.Namespace), d.selector())
		if err == nil && !slices.ContainsFunc(claims.Items, func(c corev1.PersistentVolumeClaim) bool { return !orphan.Is(&c) }) {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
	for _, c := range claims.Items {
		if orphan.Is(&c) {
			fmt.Fprintf(o.Out, "Orphaning disk %s of %s\n", c.Name, orphan.Instance(&c))
		} else {
			fmt.Fprintf(o.Out, "Warning: disk %s is not orphaned yet: the operator's disk controller labels it %s=true when it runs (see `bosh-injector disks --orphaned`)\n", c.Name, names.LabelOrphaned)
		}
	}
}

// waitPodsGone waits until no pod of the deployment is left: their
// preStop hooks drained them.
func (d *Deployment) waitPodsGone(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		var pods corev1.PodList
		if err := d.Client.List(ctx, &pods, client.InNamespace(d.Namespace), d.selector()); err != nil {
			return fmt.Errorf("waiting for the deployment's pods to drain and go: %w", err)
		}
		if len(pods.Items) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d pods of deployment '%s' are still there after %s (first %s): see `kubectl describe pod %s`; run delete-deployment again once they are gone",
				len(pods.Items), d.Name(), timeout, pods.Items[0].Name, pods.Items[0].Name)
		case <-time.After(time.Second):
		}
	}
}

// drainAll runs every instance's pre-stop and drain, told the deployment is
// deleted, as the director drains before deleting: the launcher's pre-stop
// in each process container at once (each runs the scripts of the jobs it
// hosts, then waits for all), so the pods' preStop hooks find them done.
func (d *Deployment) drainAll(ctx context.Context, o DeleteOptions) error {
	var pods corev1.PodList
	if err := d.Client.List(ctx, &pods, client.InNamespace(d.Namespace), d.selector()); err != nil {
		return err
	}
	byPod := map[string]string{}
	for _, in := range Instances(d.Manifest, pods.Items) {
		if in.Pod != nil {
			byPod[in.Pod.Name] = in.Name()
		}
	}
	var mu sync.Mutex
	var failed []string
	var wg sync.WaitGroup
	for i := range pods.Items {
		pod := &pods.Items[i]
		name, ok := byPod[pod.Name]
		if !ok {
			continue
		}
		for _, p := range ProcessContainers(pod) {
			if !podstate.Running(pod, p.Container) {
				continue
			}
			wg.Go(func() {
				var out strings.Builder
				err := d.Exec(ctx, pod, p.Container, []string{contract.Binary, "pre-stop", "--deployment-deleted"}, cluster.Streams{Stdout: &out, Stderr: &out})
				if err != nil {
					mu.Lock()
					failed = append(failed, fmt.Sprintf("instance '%s' (pod %s, container %s): %v: %s", name, pod.Name, p.Container, err, strings.TrimSpace(out.String())))
					mu.Unlock()
				}
			})
		}
		fmt.Fprintf(o.Out, "Draining instance %s\n", name)
	}
	wg.Wait()
	if len(failed) == 0 {
		return nil
	}
	slices.Sort(failed)
	msg := "pre-stop or drain failed on " + strings.Join(failed, "; ")
	if o.Force {
		fmt.Fprintf(o.Out, "Warning: %s (going on: --force)\n", msg)
		return nil
	}
	return fmt.Errorf("%s: fix the instance and run delete-deployment again, or give --force to delete it anyway", msg)
}
