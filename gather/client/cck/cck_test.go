package cck

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bosh-injector/bosh-injector/gather/names"
)

func TestFind(t *testing.T) {
	since := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	node := func(name string, ready corev1.ConditionStatus) corev1.Node {
		return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{
			Type: corev1.NodeReady, Status: ready, LastTransitionTime: metav1.NewTime(since), Reason: "NodeStatusUnknown", Message: "Kubelet stopped posting node status."}}}}
	}
	pod := func(name, node, index string) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{names.LabelInstanceGroup: "api", names.LabelInstanceIndex: index}},
			Spec: corev1.PodSpec{NodeName: node}}
	}
	lost := Find([]corev1.Pod{pod("d-api-z1-1", "b", "2"), pod("d-api-z1-0", "a", "0"), pod("d-api-z2-0", "c", "1"), pod("d-api-z2-1", "", "3")},
		[]corev1.Node{node("a", corev1.ConditionTrue), node("b", corev1.ConditionUnknown)})
	var got []string
	for _, l := range lost {
		got = append(got, l.String())
	}
	want := []string{
		"api/2 (pod d-api-z1-1) on node b: its node is not Ready since 2026-11-26T10:00:00Z (NodeStatusUnknown: Kubelet stopped posting node status.)",
		"api/1 (pod d-api-z2-0) on node c: its node is gone",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("lost:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestUnschedulable(t *testing.T) {
	for _, c := range []struct {
		node corev1.Node
		want bool
	}{
		{corev1.Node{}, false},
		{corev1.Node{Spec: corev1.NodeSpec{Unschedulable: true}}, true},
		{corev1.Node{Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute}}}}, false},
		{corev1.Node{Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoSchedule}}}}, true},
		{corev1.Node{Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule}}}}, true},
		{corev1.Node{Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "dedicated", Effect: corev1.TaintEffectNoSchedule}}}}, false},
	} {
		if got := unschedulable(&c.node); got != c.want {
			t.Errorf("%+v: %v, want %v", c.node.Spec, got, c.want)
		}
	}
}
