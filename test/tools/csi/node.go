package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// maxVolumesPerNode is what a node reports it can mount: loop devices
// are few, as a machine's disk slots are.
const maxVolumesPerNode = 16

// Node is the CSI identity and node service of one node.
type Node struct {
	csi.UnimplementedIdentityServer
	csi.UnimplementedNodeServer
	Name  string
	Store *Store
}

// serveNode serves n's identity and node services on socket until ctx ends.
func serveNode(ctx context.Context, socket string, n *Node) error {
	s := grpc.NewServer()
	csi.RegisterIdentityServer(s, n)
	csi.RegisterNodeServer(s, n)
	return serve(ctx, s, socket)
}

// serveRegistration answers the kubelet's plugin watcher on socket, as
// node-driver-registrar does: the driver's name and its endpoint.
func serveRegistration(ctx context.Context, socket, endpoint string) error {
	s := grpc.NewServer()
	registerapi.RegisterRegistrationServer(s, &registration{endpoint: endpoint})
	return serve(ctx, s, socket)
}

func serve(ctx context.Context, s *grpc.Server, socket string) error {
	if len(socket) > 107 {
		return fmt.Errorf("socket path %s is longer than a unix socket's 107 bytes: use a shorter cluster directory", socket)
	}
	if err := os.MkdirAll(filepath.Dir(socket), 0o750); err != nil {
		return err
	}
	if err := os.Remove(socket); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	l, err := net.Listen("unix", socket)
	if err != nil {
		return err
	}
	go func() {
		<-ctx.Done()
		s.Stop()
	}()
	return s.Serve(l)
}

type registration struct {
	registerapi.UnimplementedRegistrationServer
	endpoint string
}

func (r *registration) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	return &registerapi.PluginInfo{Type: registerapi.CSIPlugin, Name: DriverName, Endpoint: r.endpoint, SupportedVersions: []string{"1.0.0"}}, nil
}

func (r *registration) NotifyRegistrationStatus(_ context.Context, s *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	if !s.PluginRegistered {
		return nil, status.Errorf(codes.Internal, "the kubelet refused the plugin: %s", s.Error)
	}
	return &registerapi.RegistrationStatusResponse{}, nil
}

func (n *Node) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	return &csi.GetPluginInfoResponse{Name: DriverName, VendorVersion: "1"}, nil
}

func (n *Node) GetPluginCapabilities(context.Context, *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
	return &csi.GetPluginCapabilitiesResponse{Capabilities: []*csi.PluginCapability{
		{Type: &csi.PluginCapability_Service_{Service: &csi.PluginCapability_Service{Type: csi.PluginCapability_Service_CONTROLLER_SERVICE}}},
		{Type: &csi.PluginCapability_VolumeExpansion_{VolumeExpansion: &csi.PluginCapability_VolumeExpansion{Type: csi.PluginCapability_VolumeExpansion_ONLINE}}},
	}}, nil
}

func (n *Node) Probe(context.Context, *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	return &csi.ProbeResponse{Ready: wrapperspb.Bool(true)}, nil
}

func (n *Node) NodeGetInfo(context.Context, *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	return &csi.NodeGetInfoResponse{NodeId: n.Name, MaxVolumesPerNode: maxVolumesPerNode}, nil
}

func (n *Node) NodeGetCapabilities(context.Context, *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	return &csi.NodeGetCapabilitiesResponse{Capabilities: []*csi.NodeServiceCapability{
		{Type: &csi.NodeServiceCapability_Rpc{Rpc: &csi.NodeServiceCapability_RPC{Type: csi.NodeServiceCapability_RPC_EXPAND_VOLUME}}},
	}}, nil
}

func (n *Node) NodePublishVolume(_ context.Context, req *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	if req.VolumeId == "" || req.TargetPath == "" {
		return nil, status.Error(codes.InvalidArgument, "volume ID and target path are required")
	}
	if err := n.Store.Publish(n.Name, req.VolumeId, req.TargetPath, req.Readonly); err != nil {
		if errors.Is(err, ErrOtherNode) {
			return nil, status.Error(codes.FailedPrecondition, err.Error())
		}
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &csi.NodePublishVolumeResponse{}, nil
}

func (n *Node) NodeUnpublishVolume(_ context.Context, req *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	if err := n.Store.Unpublish(req.TargetPath); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &csi.NodeUnpublishVolumeResponse{}, nil
}

func (n *Node) NodeExpandVolume(_ context.Context, req *csi.NodeExpandVolumeRequest) (*csi.NodeExpandVolumeResponse, error) {
	size, err := n.Store.NodeExpand(req.VolumePath)
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &csi.NodeExpandVolumeResponse{CapacityBytes: size}, nil
}
