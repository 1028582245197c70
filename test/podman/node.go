package podman

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// NodeName is the node the stand-in's pods run on, as spec.nodeName and
// the Node object say.
const NodeName = "podman"

// bind assigns pod to the stand-in's Node, creating that first, as a
// scheduler binds a pod before a kubelet runs it: the EndpointSlice
// controller lists a pod in a Service that publishes only ready addresses
// once its Node exists.
func (k *Kubelet) bind(ctx context.Context, pod *corev1.Pod) error {
	if pod.Spec.NodeName != "" {
		return nil
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: NodeName}}
	if err := k.Client.Create(ctx, node); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("node %s: %w", NodeName, err)
	}
	binding := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace},
		Target: corev1.ObjectReference{Kind: "Node", Name: NodeName}}
	if err := k.Client.SubResource("binding").Create(ctx, pod, binding); err != nil {
		return fmt.Errorf("binding pod %s/%s to node %s: %w", pod.Namespace, pod.Name, NodeName, err)
	}
	return nil
}

// publishIP writes the pod's address into its status before its containers
// run, as a kubelet does once the pod's sandbox is up: init containers of a
// pod behind a Service that publishes not-ready addresses can resolve the
// pod's own name.
func (k *Kubelet) publishIP(ctx context.Context, pod *corev1.Pod, ip string) error {
	var p corev1.Pod
	if err := k.Client.Get(ctx, client.ObjectKeyFromObject(pod), &p); err != nil {
		return err
	}
	now := metav1.Now()
	p.Status.Phase = corev1.PodPending
	p.Status.PodIP, p.Status.PodIPs = ip, []corev1.PodIP{{IP: ip}}
	p.Status.HostIP, p.Status.HostIPs = "127.0.0.1", []corev1.HostIP{{IP: "127.0.0.1"}}
	p.Status.StartTime = &now
	p.Status.Conditions = []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: corev1.PodInitialized, Status: corev1.ConditionFalse, LastTransitionTime: now},
	}
	if err := k.Client.Status().Update(ctx, &p); err != nil {
		return fmt.Errorf("publishing the IP of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}
