package disks

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bosh-injector/bosh-injector/gather/names"
	"github.com/bosh-injector/bosh-injector/gather/operator/orphan"
	"github.com/bosh-injector/bosh-injector/gather/operator/podstate"
)

// Attach is `bosh attach-disk`: the orphaned claim becomes the persistent
// disk of the instance whose pod is given, and the instance's current
// disk is orphaned, labelled with the instance and time as the director's
// orphan disk manager does. A StatefulSet names its claims, so the swap
// happens on the PersistentVolumes: the orphan's volume is bound to a new
// claim of the instance's name, the instance's volume to a new orphaned
// claim, both volumes retained meanwhile (their reclaim policy put back at
// the end) so that an interrupted attach loses no data. The pod is
// deleted, which drains it, and the StatefulSet starts it again on the
// attached disk: the director asks for a stopped instance instead, which
// an instance here is while its pod is away.
type Attach struct {
	Client client.Client
	Out    io.Writer
	// Instance names the instance as the director does, "group/uuid
	// (index)", for the orphan made of its disk.
	Instance string
	Pod      *corev1.Pod
	// Orphan is the orphaned claim to attach.
	Orphan string
	// Poll is how often a wait looks again; Timeout how long it waits.
	Poll, Timeout time.Duration
	// Now stamps the new orphan.
	Now func() time.Time
}

// instanceClaim is the claim of the pod that holds its persistent disk:
// its only claim, or the one of template, which the StatefulSet names
// "<template>-<pod>".
func instanceClaim(pod *corev1.Pod, template string) (string, error) {
	var claims []string
	for _, v := range pod.Spec.Volumes {
		if pvc := v.PersistentVolumeClaim; pvc != nil {
			claims = append(claims, pvc.ClaimName)
		}
	}
	for _, c := range claims {
		if len(claims) == 1 || c == template+"-"+pod.Name {
			return c, nil
		}
	}
	return "", fmt.Errorf("pod %s has no persistent disk to replace (no claim of template '%s')", pod.Name, template)
}

// orphanOf is the orphaned claim made for a volume the instance's claim
// held: the claim's labels and spec, bound to the volume by name.
func orphanOf(current *corev1.PersistentVolumeClaim, volume, instance string, now time.Time) *corev1.PersistentVolumeClaim {
	o := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{
		Namespace: current.Namespace,
		Name:      current.Name + "-orphan-" + strconv.FormatInt(now.Unix(), 36),
		Labels:    maps.Clone(current.Labels),
	}, Spec: *current.Spec.DeepCopy()}
	orphan.Mark(&o.ObjectMeta, instance, now)
	o.Spec.VolumeName = volume
	if size, ok := current.Status.Capacity[corev1.ResourceStorage]; ok {
		o.Spec.Resources.Requests[corev1.ResourceStorage] = size
	}
	return o
}

// Run attaches the orphan.
func (a *Attach) Run(ctx context.Context, template string) error {
	ns := a.Pod.Namespace
	var orphaned, current corev1.PersistentVolumeClaim
	if err := a.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: a.Orphan}, &orphaned); err != nil {
		return fmt.Errorf("disk '%s': %w", a.Orphan, err)
	}
	if !orphan.Is(&orphaned) {
		return fmt.Errorf("disk '%s' is not orphaned: an instance mounts it (only orphaned disks can be attached)", a.Orphan)
	}
	if orphaned.Spec.VolumeName == "" {
		return fmt.Errorf("disk '%s' has no volume", a.Orphan)
	}
	if disk := orphaned.Annotations[names.AnnotationDiskName]; disk != "" {
		// A named disk's orphan replaces the instance's disk of that name.
		template = names.NamedDiskVolume(disk)
	}
	name, err := instanceClaim(a.Pod, template)
	if err != nil {
		return err
	}
	if err := a.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &current); err != nil {
		return fmt.Errorf("instance '%s': its disk %s: %w", a.Instance, name, err)
	}
	if current.Spec.VolumeName == "" {
		return fmt.Errorf("instance '%s': its disk %s has no volume yet", a.Instance, name)
	}
	attached, previous := orphaned.Spec.VolumeName, current.Spec.VolumeName
	restore := map[string]corev1.PersistentVolumeReclaimPolicy{}
	for _, pv := range []string{attached, previous} {
		policy, err := a.retain(ctx, pv)
		if err != nil {
			return err
		}
		restore[pv] = policy
	}
	fmt.Fprintf(a.Out, "Retaining volumes %s (disk %s) and %s (disk %s) while they change claims\n", attached, a.Orphan, previous, name)
	if err := a.Client.Delete(ctx, &orphaned, client.Preconditions{UID: &orphaned.UID}); err != nil {
		return fmt.Errorf("releasing disk '%s': %w", a.Orphan, err)
	}
	if err := a.waitGone(ctx, &orphaned); err != nil {
		return err
	}
	if err := a.bindTo(ctx, attached, ns, name); err != nil {
		return err
	}
	// The claim goes once the pod does (its protection finalizer); the
	// pod's deletion drains it, and the StatefulSet makes both again.
	if err := a.Client.Delete(ctx, &current, client.Preconditions{UID: &current.UID}); err != nil {
		return fmt.Errorf("releasing disk %s: %w", name, err)
	}
	fmt.Fprintf(a.Out, "Stopping instance '%s': deleting pod %s (drain runs)\n", a.Instance, a.Pod.Name)
	if err := a.Client.Delete(ctx, a.Pod, client.Preconditions{UID: &a.Pod.UID}); client.IgnoreNotFound(err) != nil {
		return err
	}
	if err := a.waitGone(ctx, &current); err != nil {
		return err
	}
	made := orphanOf(&current, previous, a.Instance, a.Now())
	if err := a.bindTo(ctx, previous, ns, made.Name); err != nil {
		return err
	}
	if err := a.Client.Create(ctx, made); err != nil {
		return fmt.Errorf("orphaning the instance's disk: %w", err)
	}
	fmt.Fprintf(a.Out, "Orphaned disk %s of instance '%s' as %s\n", name, a.Instance, made.Name)
	if err := a.wait(ctx, "disk "+name+" bound to volume "+attached, func() (bool, error) {
		var c corev1.PersistentVolumeClaim
		if err := a.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &c); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		if c.Spec.VolumeName != "" && c.Spec.VolumeName != attached {
			return false, fmt.Errorf("disk %s was bound to volume %s, not %s", name, c.Spec.VolumeName, attached)
		}
		return c.Status.Phase == corev1.ClaimBound, nil
	}); err != nil {
		return err
	}
	for pv, policy := range restore {
		if err := a.setPolicy(ctx, pv, policy); err != nil {
			return err
		}
	}
	fmt.Fprintf(a.Out, "Attached disk '%s' to instance '%s' (claim %s)\n", a.Orphan, a.Instance, name)
	// The claim the StatefulSet made has its template's size: the
	// operator grows it to the recorded one (a drain, when the pod came
	// first) before the instance is back for good.
	return a.wait(ctx, "instance '"+a.Instance+"' to be Ready", func() (bool, error) {
		var c corev1.PersistentVolumeClaim
		var pod corev1.Pod
		if err := a.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &c); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		if err := a.Client.Get(ctx, client.ObjectKeyFromObject(a.Pod), &pod); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return c.Annotations[names.AnnotationDrainedPod] == "" && pod.UID != a.Pod.UID && pod.DeletionTimestamp == nil && podstate.Ready(&pod), nil
	})
}

// retain makes a volume's reclaim policy Retain and returns what it was.
func (a *Attach) retain(ctx context.Context, name string) (corev1.PersistentVolumeReclaimPolicy, error) {
	var pv corev1.PersistentVolume
	if err := a.Client.Get(ctx, client.ObjectKey{Name: name}, &pv); err != nil {
		return "", fmt.Errorf("volume %s: %w", name, err)
	}
	was := pv.Spec.PersistentVolumeReclaimPolicy
	return was, a.setPolicy(ctx, name, corev1.PersistentVolumeReclaimRetain)
}

func (a *Attach) setPolicy(ctx context.Context, name string, policy corev1.PersistentVolumeReclaimPolicy) error {
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name}}
	patch := fmt.Sprintf(`{"spec":{"persistentVolumeReclaimPolicy":%q}}`, policy)
	if err := a.Client.Patch(ctx, pv, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		return fmt.Errorf("setting volume %s's reclaim policy to %s: %w", name, policy, err)
	}
	return nil
}

// bindTo reserves a volume for the claim of that name, made next.
func (a *Attach) bindTo(ctx context.Context, volume, namespace, claim string) error {
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: volume}}
	patch := fmt.Sprintf(`{"spec":{"claimRef":{"kind":"PersistentVolumeClaim","apiVersion":"v1","namespace":%q,"name":%q,"uid":null,"resourceVersion":null}}}`, namespace, claim)
	if err := a.Client.Patch(ctx, pv, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		return fmt.Errorf("reserving volume %s for disk %s: %w", volume, claim, err)
	}
	return nil
}

func (a *Attach) waitGone(ctx context.Context, c *corev1.PersistentVolumeClaim) error {
	return a.wait(ctx, "claim "+c.Name+" to be deleted", func() (bool, error) {
		var now corev1.PersistentVolumeClaim
		err := a.Client.Get(ctx, client.ObjectKeyFromObject(c), &now)
		if apierrors.IsNotFound(err) || (err == nil && now.UID != c.UID) {
			return true, nil
		}
		return false, err
	})
}

func (a *Attach) wait(ctx context.Context, what string, done func() (bool, error)) error {
	deadline := time.Now().Add(a.Timeout)
	for {
		ok, err := done()
		if err != nil || ok {
			return err
		}
		if time.Now().After(deadline) {
			return errors.New("waited " + a.Timeout.String() + " for " + what + ": the volumes are retained; run attach-disk again or bind them by hand")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(a.Poll):
		}
	}
}
