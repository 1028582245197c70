// Package cck finds the instances of a deployment that nodes which stopped
// hold, and recreates them elsewhere, as `bosh cck` finds the VMs an agent
// no longer answers for and recreates them: a StatefulSet replaces a pod
// on a lost node only once the pod is deleted, which that node's kubelet
// never confirms.
package cck

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/bosh-injector/bosh-injector/gather/names"
)

// Why a node counts as lost.
const (
	ReasonNodeNotReady = "its node is not Ready"
	ReasonNodeGone     = "its node is gone"
)

// Lost is an instance on a lost node.
type Lost struct {
	Pod, Group, Index, Node string
	Reason                  string
	// Since is when the node stopped being Ready (zero when gone); Detail
	// is what the node controller says of it.
	Since  time.Time
	Detail string
}

func (l Lost) String() string {
	s := fmt.Sprintf("%s/%s (pod %s) on node %s: %s", l.Group, l.Index, l.Pod, l.Node, l.Reason)
	if !l.Since.IsZero() {
		s += " since " + l.Since.UTC().Format(time.RFC3339)
	}
	if l.Detail != "" {
		s += " (" + l.Detail + ")"
	}
	return s
}

// Find returns the pods, in name order, whose node is not Ready or no
// longer exists.
func Find(pods []corev1.Pod, nodes []corev1.Node) []Lost {
	byName := map[string]*corev1.Node{}
	for i := range nodes {
		byName[nodes[i].Name] = &nodes[i]
	}
	var out []Lost
	for _, p := range pods {
		if p.Spec.NodeName == "" {
			continue
		}
		l := Lost{Pod: p.Name, Group: p.Labels[names.LabelInstanceGroup], Index: p.Labels[names.LabelInstanceIndex], Node: p.Spec.NodeName}
		n, ok := byName[p.Spec.NodeName]
		if !ok {
			l.Reason = ReasonNodeGone
			out = append(out, l)
			continue
		}
		i := slices.IndexFunc(n.Status.Conditions, func(c corev1.NodeCondition) bool { return c.Type == corev1.NodeReady })
		if i < 0 || n.Status.Conditions[i].Status == corev1.ConditionTrue {
			continue
		}
		c := n.Status.Conditions[i]
		l.Reason, l.Since, l.Detail = ReasonNodeNotReady, c.LastTransitionTime.Time, strings.TrimSpace(c.Reason+": "+c.Message)
		out = append(out, l)
	}
	slices.SortFunc(out, func(a, b Lost) int { return strings.Compare(a.Pod, b.Pod) })
	return out
}

// Of lists a deployment's pods in namespace ns and the cluster's nodes and
// returns Find of them.
func Of(ctx context.Context, kube kubernetes.Interface, ns, deployment string) ([]Lost, error) {
	// Its instances, not its gathering Jobs' pods.
	selector := names.LabelDeployment + "=" + names.LabelValue(deployment) + "," + names.LabelInstanceGroup
	pods, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, fmt.Errorf("listing deployment %s's pods in namespace %s: %w", deployment, ns, err)
	}
	nodes, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing the nodes: %w", err)
	}
	return Find(pods.Items, nodes.Items), nil
}

// Recreate deletes each lost pod at once, without waiting for its node's
// kubelet, so that its StatefulSet makes it again on a node that runs,
// with the same name and index. Only for nodes that are really down: a
// node merely cut off would still run the old instance beside the new.
func Recreate(ctx context.Context, kube kubernetes.Interface, ns string, lost []Lost) error {
	for _, l := range lost {
		err := kube.CoreV1().Pods(ns).Delete(ctx, l.Pod, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
		if err != nil {
			return fmt.Errorf("deleting pod %s of %s/%s: %w", l.Pod, l.Group, l.Index, err)
		}
	}
	return nil
}
