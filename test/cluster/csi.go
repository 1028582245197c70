package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The cluster's storage is test/tools/csi's driver (`make testbin` builds
// it): each volume a sparse file formatted XFS under the cluster's
// directory, mounted through a loop device on the node it was made for,
// growing online. A volume stays on its node, as a local disk does: its
// PersistentVolume's node affinity keeps its pods there, and a pod whose
// node is drained stays Pending until the node is back.
const (
	csiDriver = "disks.bosh-injector.test"
	csiBinary = "bosh-injector-csi"
	// StorageClass is the default StorageClass's name.
	StorageClass = "standard"
)

// startCSI makes the driver's CSIDriver and the default StorageClass and
// starts the driver on every node, the first node's also provisioning and
// growing claims; the kubelets register it once they start.
func (c *Cluster) startCSI(ctx context.Context) error {
	objects := []client.Object{
		// No attach step: a volume is a file of the node's machine.
		&storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: csiDriver}, Spec: storagev1.CSIDriverSpec{
			AttachRequired: ptr.To(false), PodInfoOnMount: ptr.To(false),
			// The fresh filesystem's root is open to all: nothing to chown.
			FSGroupPolicy:        ptr.To(storagev1.NoneFSGroupPolicy),
			VolumeLifecycleModes: []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent}}},
		&storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: StorageClass,
			Annotations: map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}},
			Provisioner: csiDriver, ReclaimPolicy: ptr.To(corev1.PersistentVolumeReclaimDelete),
			AllowVolumeExpansion: ptr.To(true),
			// Made on the node the scheduler picks for the claim's pod.
			VolumeBindingMode: ptr.To(storagev1.VolumeBindingWaitForFirstConsumer)},
	}
	for _, o := range objects {
		if err := c.Client.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating %T %s: %w", o, o.GetName(), err)
		}
	}
	volumes := filepath.Join(c.Dir, "csi")
	return c.eachNode(func(n *Node) error {
		args := []string{"--node=" + n.Name, "--kubelet-dir=" + n.kubeletDir(), "--volumes=" + volumes}
		if n.index == 0 {
			args = append(args, "--kubeconfig="+c.Kubeconfig)
		}
		p, err := c.startOn(n, "csi", nil, filepath.Join(c.BinDir, csiBinary), args...)
		if err != nil {
			return err
		}
		socket := filepath.Join(n.kubeletDir(), "plugins_registry", "disks.sock")
		return until(ctx, p, n.Name+"'s CSI driver", 10*time.Second, func() bool {
			_, err := os.Stat(socket)
			return err == nil
		})
	})
}

// detachLoops detaches the loop devices still backed by files under dir:
// a volume mounted when the cluster was torn down (its lazy unmount
// releases the device once nothing holds it; this does not wait). The
// machine has few loop devices.
func detachLoops(dir string) error {
	files, err := filepath.Glob("/sys/block/loop*/loop/backing_file")
	if err != nil {
		return err
	}
	var errs []error
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil || !strings.HasPrefix(strings.TrimSpace(string(b)), dir+"/") {
			continue
		}
		dev := "/dev/" + filepath.Base(filepath.Dir(filepath.Dir(f)))
		if out, err := exec.Command("losetup", "-d", dev).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("losetup -d %s: %v: %s", dev, err, out))
		}
	}
	return errors.Join(errs...)
}
