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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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

// taintWait bounds the wait for a lost node's NoSchedule taint.
const taintWait = time.Minute

// Recreate deletes each lost pod at once, without waiting for its node's
// kubelet, so that its StatefulSet makes it again on a node that runs,
// with the same name and index. Only for nodes that are really down: a
// node merely cut off would still run the old instance beside the new.
// A node not Ready is first waited for until the scheduler avoids it (the
// node controller taints it a moment after its condition changes, later
// under load): else the new pod could be placed on it again.
func Recreate(ctx context.Context, kube kubernetes.Interface, ns string, lost []Lost) error {
	for _, l := range lost {
		if l.Reason == ReasonNodeNotReady {
			if err := waitUnschedulable(ctx, kube, l.Node); err != nil {
				return err
			}
		}
		err := kube.CoreV1().Pods(ns).Delete(ctx, l.Pod, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
		if err != nil {
			return fmt.Errorf("deleting pod %s of %s/%s: %w", l.Pod, l.Group, l.Index, err)
		}
	}
	return nil
}

// waitUnschedulable waits until node takes no new pods, or is gone.
func waitUnschedulable(ctx context.Context, kube kubernetes.Interface, node string) error {
	ctx, cancel := context.WithTimeout(ctx, taintWait)
	defer cancel()
	for {
		n, err := kube.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if apierrors.IsNotFound(err) || (err == nil && unschedulable(n)) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("node %s is not Ready but still takes new pods (no %s or %s NoSchedule taint after %s): cordon it (kubectl cordon %s) and run again",
				node, corev1.TaintNodeUnreachable, corev1.TaintNodeNotReady, taintWait, node)
		case <-time.After(time.Second):
		}
	}
}

// unschedulable says whether the scheduler places no new pod on n: it is
// cordoned, or the node controller tainted it unreachable or not ready.
func unschedulable(n *corev1.Node) bool {
	return n.Spec.Unschedulable || slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool {
		return t.Effect == corev1.TaintEffectNoSchedule && (t.Key == corev1.TaintNodeUnreachable || t.Key == corev1.TaintNodeNotReady)
	})
}
