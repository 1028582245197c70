package main

import (
	"context"
	"errors"

	"github.com/container-storage-interface/spec/lib/go/csi"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"
)

// provisioner makes a claim's volume on the node the scheduler picked.
type provisioner struct{ ctrl *Controller }

func (p *provisioner) Provision(ctx context.Context, o controller.ProvisionOptions) (*corev1.PersistentVolume, controller.ProvisioningState, error) {
	if o.SelectedNodeName == "" {
		return nil, controller.ProvisioningFinished, errors.New("a volume is local to a node: the StorageClass needs volumeBindingMode WaitForFirstConsumer")
	}
	if m := o.PVC.Spec.VolumeMode; m != nil && *m == corev1.PersistentVolumeBlock {
		return nil, controller.ProvisioningFinished, errors.New("only volumeMode Filesystem is supported")
	}
	want := o.PVC.Spec.Resources.Requests[corev1.ResourceStorage]
	res, err := p.ctrl.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: o.PVName,
		CapacityRange: &csi.CapacityRange{RequiredBytes: want.Value()},
		AccessibilityRequirements: &csi.TopologyRequirement{
			Preferred: []*csi.Topology{{Segments: map[string]string{topologyKey: o.SelectedNodeName}}}}})
	if err != nil {
		return nil, controller.ProvisioningFinished, err
	}
	v := res.Volume
	reclaim := corev1.PersistentVolumeReclaimDelete
	if o.StorageClass.ReclaimPolicy != nil {
		reclaim = *o.StorageClass.ReclaimPolicy
	}
	var terms []corev1.NodeSelectorTerm
	for _, t := range v.AccessibleTopology {
		var exprs []corev1.NodeSelectorRequirement
		for k, val := range t.Segments {
			exprs = append(exprs, corev1.NodeSelectorRequirement{Key: k, Operator: corev1.NodeSelectorOpIn, Values: []string{val}})
		}
		terms = append(terms, corev1.NodeSelectorTerm{MatchExpressions: exprs})
	}
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: o.PVName},
		Spec: corev1.PersistentVolumeSpec{
			PersistentVolumeReclaimPolicy: reclaim,
			AccessModes:                   o.PVC.Spec.AccessModes,
			VolumeMode:                    o.PVC.Spec.VolumeMode,
			MountOptions:                  o.StorageClass.MountOptions,
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: *resource.NewQuantity(v.CapacityBytes, resource.BinarySI)},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
				Driver: DriverName, VolumeHandle: v.VolumeId, FSType: "xfs"}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: terms}},
		},
	}, controller.ProvisioningFinished, nil
}

func (p *provisioner) Delete(ctx context.Context, pv *corev1.PersistentVolume) error {
	if pv.Spec.CSI == nil || pv.Spec.CSI.Driver != DriverName {
		return &controller.IgnoredError{Reason: "not a volume of " + DriverName}
	}
	_, err := p.ctrl.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: pv.Spec.CSI.VolumeHandle})
	return err
}
