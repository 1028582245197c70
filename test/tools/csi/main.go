// Command bosh-injector-csi is the test cluster's storage: a CSI driver
// whose volumes are node-local sparse files formatted XFS, attached with a
// loop device and mounted where the kubelet asks, which grow online
// (ControllerExpandVolume grows the file, NodeExpandVolume `losetup -c` and
// `xfs_growfs`: ext4's online resize needs CAP_SYS_RESOURCE, which this
// machine's root lacks, XFS's needs CAP_SYS_ADMIN only).
//
// kubernetes-csi's sidecars are not in the Go module proxy, so this binary
// plays their parts around the real kubelet: it answers the kubelet's
// plugin registration itself (node-driver-registrar), provisions with
// sig-storage-lib-external-provisioner, the library external-provisioner is
// built on, and grows claims as external-resizer does (resize.go).
//
// One process per node (--node) serves the CSI identity and node services
// on the kubelet's plugin socket; the one given --kubeconfig also runs the
// provisioner and the resizer, calling the controller service in process.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"
)

// DriverName is the CSIDriver's and the StorageClass's provisioner name.
const DriverName = "disks.bosh-injector.test"

func main() {
	node := flag.String("node", "", "this node's name (the CSI node ID)")
	kubeletDir := flag.String("kubelet-dir", "", "the kubelet's --root-dir: its plugin and registration sockets live there")
	volumes := flag.String("volumes", "", "the directory holding every node's volume files, one directory per node")
	kubeconfig := flag.String("kubeconfig", "", "when given, also provision and grow claims with this kubeconfig")
	flag.Parse()
	if *node == "" || *kubeletDir == "" || *volumes == "" {
		fmt.Fprintln(os.Stderr, "bosh-injector-csi: --node, --kubelet-dir and --volumes are required")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *node, *kubeletDir, *volumes, *kubeconfig); err != nil {
		fmt.Fprintln(os.Stderr, "bosh-injector-csi:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, node, kubeletDir, volumes, kubeconfig string) error {
	store := &Store{Root: volumes}
	// Short names: a node's kubelet directory is deep in the cluster's,
	// and a socket's path has at most 107 bytes.
	socket := filepath.Join(kubeletDir, "plugins", "disks.sock")
	errs := make(chan error, 3)
	go func() { errs <- serveNode(ctx, socket, &Node{Name: node, Store: store}) }()
	go func() {
		errs <- serveRegistration(ctx, filepath.Join(kubeletDir, "plugins_registry", "disks.sock"), socket)
	}()
	if kubeconfig != "" {
		config, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			return err
		}
		cs, err := kubernetes.NewForConfig(config)
		if err != nil {
			return err
		}
		ctrl := &Controller{Store: store}
		pc := controller.NewProvisionController(ctx, cs, DriverName, &provisioner{ctrl: ctrl},
			controller.LeaderElection(false), controller.FailedProvisionThreshold(0))
		go pc.Run(ctx)
		go func() { errs <- (&resizer{client: cs, ctrl: ctrl}).run(ctx) }()
	}
	select {
	case <-ctx.Done():
		return nil
	case err := <-errs:
		return err
	}
}
