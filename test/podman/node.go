package podman

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
