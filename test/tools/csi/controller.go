package main

import (
	"context"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Controller is the CSI controller service, called in process by the
// provisioner and the resizer.
type Controller struct {
	csi.UnimplementedControllerServer
	Store *Store
}

// topologyKey places a volume: a node's hostname label, so its
// PersistentVolume's node affinity keeps its pods on its node.
const topologyKey = "kubernetes.io/hostname"

func (c *Controller) CreateVolume(_ context.Context, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	var node string
	if ar := req.AccessibilityRequirements; ar != nil {
		for _, t := range append(ar.Preferred, ar.Requisite...) {
			if node = t.Segments[topologyKey]; node != "" {
				break
			}
		}
	}
	if node == "" {
		return nil, status.Error(codes.InvalidArgument, "a volume is local to a node: the claim's StorageClass needs volumeBindingMode WaitForFirstConsumer")
	}
	id, size, err := c.Store.Create(node, req.Name, req.CapacityRange.GetRequiredBytes())
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &csi.CreateVolumeResponse{Volume: &csi.Volume{VolumeId: id, CapacityBytes: size,
		AccessibleTopology: []*csi.Topology{{Segments: map[string]string{topologyKey: node}}}}}, nil
}

func (c *Controller) DeleteVolume(_ context.Context, req *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	if err := c.Store.Delete(req.VolumeId); err != nil {
		return nil, status.Error(codes.FailedPrecondition, err.Error())
	}
	return &csi.DeleteVolumeResponse{}, nil
}

func (c *Controller) ControllerExpandVolume(_ context.Context, req *csi.ControllerExpandVolumeRequest) (*csi.ControllerExpandVolumeResponse, error) {
	size, err := c.Store.Expand(req.VolumeId, req.CapacityRange.GetRequiredBytes())
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &csi.ControllerExpandVolumeResponse{CapacityBytes: size, NodeExpansionRequired: true}, nil
}
