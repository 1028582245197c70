package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// resizer grows the volume of a claim asked to be larger, as
// external-resizer does with the kubelet: the claim's status says the
// controller's part is in progress, the volume and its PersistentVolume
// grow, then the status says the node's part is pending, and the kubelet
// grows the filesystem (NodeExpandVolume) and sets the claim's capacity.
type resizer struct {
	client kubernetes.Interface
	ctrl   *Controller
	queue  workqueue.TypedRateLimitingInterface[string]
}

func (r *resizer) run(ctx context.Context) error {
	r.queue = workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	defer r.queue.ShutDown()
	f := informers.NewSharedInformerFactory(r.client, 10*time.Minute)
	claims := f.Core().V1().PersistentVolumeClaims()
	enqueue := func(o any) {
		if key, err := cache.MetaNamespaceKeyFunc(o); err == nil {
			r.queue.Add(key)
		}
	}
	if _, err := claims.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue, UpdateFunc: func(_, o any) { enqueue(o) }}); err != nil {
		return err
	}
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	go func() {
		<-ctx.Done()
		r.queue.ShutDown()
	}()
	for {
		key, quit := r.queue.Get()
		if quit {
			return nil
		}
		ns, name, _ := cache.SplitMetaNamespaceKey(key)
		if err := r.sync(ctx, ns, name); err != nil {
			fmt.Fprintf(os.Stderr, "resizing claim %s: %v\n", key, err)
			r.queue.AddRateLimited(key)
		} else {
			r.queue.Forget(key)
		}
		r.queue.Done(key)
	}
}

func (r *resizer) sync(ctx context.Context, ns, name string) error {
	pvc, err := r.client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil || pvc.Spec.VolumeName == "" || pvc.Status.Phase != corev1.ClaimBound {
		return nil
	}
	want := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	if capacity := pvc.Status.Capacity[corev1.ResourceStorage]; want.Cmp(capacity) <= 0 {
		return nil
	}
	pv, err := r.client.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if pv.Spec.CSI == nil || pv.Spec.CSI.Driver != DriverName {
		return nil
	}
	state := pvc.Status.AllocatedResourceStatuses[corev1.ResourceStorage]
	if state == corev1.PersistentVolumeClaimNodeResizePending || state == corev1.PersistentVolumeClaimNodeResizeInProgress {
		return nil // the kubelet's part
	}
	if pvCap := pv.Spec.Capacity[corev1.ResourceStorage]; pvCap.Cmp(want) < 0 {
		if pvc, err = r.setStatus(ctx, pvc, want, corev1.PersistentVolumeClaimControllerResizeInProgress,
			corev1.PersistentVolumeClaimResizing, ""); err != nil {
			return err
		}
		res, err := r.ctrl.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: pv.Spec.CSI.VolumeHandle,
			CapacityRange: &csi.CapacityRange{RequiredBytes: want.Value()}})
		if err != nil {
			return err
		}
		pv.Spec.Capacity[corev1.ResourceStorage] = *resource.NewQuantity(res.CapacityBytes, resource.BinarySI)
		if _, err := r.client.CoreV1().PersistentVolumes().Update(ctx, pv, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	// Also where an earlier run stopped after growing the volume.
	_, err = r.setStatus(ctx, pvc, want, corev1.PersistentVolumeClaimNodeResizePending,
		corev1.PersistentVolumeClaimFileSystemResizePending, "Waiting for the node to grow the filesystem.")
	return err
}

// setStatus records the claim's resize state and condition, as
// external-resizer does.
func (r *resizer) setStatus(ctx context.Context, pvc *corev1.PersistentVolumeClaim, want resource.Quantity,
	state corev1.ClaimResourceStatus, cond corev1.PersistentVolumeClaimConditionType, msg string) (*corev1.PersistentVolumeClaim, error) {
	pvc = pvc.DeepCopy()
	if pvc.Status.AllocatedResources == nil {
		pvc.Status.AllocatedResources = corev1.ResourceList{}
	}
	pvc.Status.AllocatedResources[corev1.ResourceStorage] = want
	if pvc.Status.AllocatedResourceStatuses == nil {
		pvc.Status.AllocatedResourceStatuses = map[corev1.ResourceName]corev1.ClaimResourceStatus{}
	}
	pvc.Status.AllocatedResourceStatuses[corev1.ResourceStorage] = state
	pvc.Status.Conditions = []corev1.PersistentVolumeClaimCondition{{Type: cond, Status: corev1.ConditionTrue,
		LastTransitionTime: metav1.Now(), Message: msg}}
	return r.client.CoreV1().PersistentVolumeClaims(pvc.Namespace).UpdateStatus(ctx, pvc, metav1.UpdateOptions{})
}
