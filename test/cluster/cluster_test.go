package cluster_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bosh-injector/bosh-injector/test/cluster"
	"github.com/bosh-injector/bosh-injector/test/fixtures"
)

// TestCluster starts the node and checks what pods rely on from a kubelet:
// images from the cluster's registry, Secret volumes and downward-API env,
// cluster DNS through the kube-dns Service (kube-proxy's rules), a
// provisioned PersistentVolumeClaim grown online, logs and exec through the apiserver;
// then that teardown leaves nothing behind. It runs from a TMPDIR of 150
// bytes, which holds the cluster's directory: every socket (the kubelet's,
// the CSI driver's, containerd's) lives at a short path of its own, as
// TestSocketPaths checks for every node (issue 47).
func TestCluster(t *testing.T) {
	ctx := context.Background()
	before, err := cluster.MachineSysctls()
	if err != nil {
		t.Fatal(err)
	}
	tmpdir := t.TempDir()
	tmpdir = filepath.Join(tmpdir, "long-tmpdir"+strings.Repeat("-", max(150-len(tmpdir)-len("/long-tmpdir"), 0)))
	if err := os.Mkdir(tmpdir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TMPDIR", tmpdir)
	var log strings.Builder
	c, err := cluster.Start(ctx, cluster.Options{Log: &log})
	if err != nil {
		t.Fatal(err)
	}
	t.Log(log.String())
	if !strings.HasPrefix(c.Dir, tmpdir+"/") || len(tmpdir) < 150 {
		t.Errorf("the cluster's directory %s is not under the TMPDIR of %d bytes %s", c.Dir, len(tmpdir), tmpdir)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			if t.Failed() {
				c.Logs(os.Stderr, 30)
			}
			_ = c.Stop()
		}
	})
	// Put back as soon as the node was Ready, not only at teardown.
	if now, _ := cluster.MachineSysctls(); now != before {
		t.Errorf("sysctls while the node runs:\n%s\nbefore:\n%s", now, before)
	}
	// The inotify instance limit is raised while any cluster runs (the
	// last one puts it back: other packages' may run beside this one).
	out, err := exec.Command("sysctl", "-n", "fs.inotify.max_user_instances").Output()
	if n, _ := strconv.Atoi(strings.TrimSpace(string(out))); err != nil || n < 1024 {
		t.Errorf("fs.inotify.max_user_instances while the node runs: %q, %v", out, err)
	}

	node, err := c.Clientset.CoreV1().Nodes().Get(ctx, c.NodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if v, rt := node.Status.NodeInfo.KubeletVersion, node.Status.NodeInfo.ContainerRuntimeVersion; v != "v1.37.2" || !strings.HasPrefix(rt, "containerd://2.") {
		t.Errorf("node runs kubelet %s on %s", v, rt)
	}

	image := c.Registry + "/debian:bookworm-slim"
	if err := fixtures.PushImage(ctx, "docker.io/library/debian:bookworm-slim", image); err != nil {
		t.Fatalf("pushing the base image (make base-image): %v", err)
	}
	const ns = "default"
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: ns}, StringData: map[string]string{"k": "from-a-secret"}}
	claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "disk", Namespace: ns}, Spec: corev1.PersistentVolumeClaimSpec{
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "checks", Namespace: ns}, Spec: corev1.PodSpec{
		TerminationGracePeriodSeconds: ptr.To[int64](1),
		Containers: []corev1.Container{{Name: "main", Image: image, Command: []string{"bash", "-c", `
			echo "secret: $(cat /secret/k)"; echo "env: $POD_IP $NODE $NS $FROM_SECRET"
			getent hosts kubernetes.default.svc.cluster.local kube-dns.kube-system.svc.cluster.local
			echo written > /disk/file && echo "disk: $(cat /disk/file)"
			exec sleep infinity`},
			Env: []corev1.EnvVar{
				{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
				{Name: "NODE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}},
				{Name: "NS", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
				{Name: "FROM_SECRET", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
					LocalObjectReference: corev1.LocalObjectReference{Name: "s"}, Key: "k"}}},
			},
			VolumeMounts: []corev1.VolumeMount{{Name: "secret", MountPath: "/secret"}, {Name: "disk", MountPath: "/disk"}}}},
		Volumes: []corev1.Volume{
			{Name: "secret", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s"}}},
			{Name: "disk", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "disk"}}},
		}}}
	for _, o := range []client.Object{secret, claim, pod} {
		if err := c.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	created := time.Now()
	var logs string
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		data, err := c.Clientset.CoreV1().Pods(ns).GetLogs("checks", &corev1.PodLogOptions{}).DoRaw(ctx)
		logs = string(data)
		return err == nil && strings.Contains(logs, "disk:"), nil
	}); err != nil {
		var p corev1.Pod
		_ = c.Client.Get(ctx, client.ObjectKeyFromObject(pod), &p)
		t.Fatalf("the pod's log: %s\nstatus: %+v", logs, p.Status)
	}
	t.Logf("pod created to its checks done in %s:\n%s", time.Since(created).Round(time.Millisecond), logs)
	for _, want := range []string{"secret: from-a-secret", "env: 10.244.", " " + c.NodeName + " default from-a-secret",
		cluster.APIServiceIP + " ", cluster.DNSServiceIP + " ", "disk: written"} {
		if !strings.Contains(logs, want) {
			t.Errorf("the pod's log lacks %q", want)
		}
	}
	kubectl := exec.Command(filepath.Join(c.BinDir, "kubectl"), "exec", "checks", "--", "cat", "/secret/k")
	kubectl.Env = append(os.Environ(), "KUBECONFIG="+c.Kubeconfig)
	if out, err := kubectl.CombinedOutput(); err != nil || string(out) != "from-a-secret" {
		t.Errorf("kubectl exec: %v: %s", err, out)
	}
	var pv corev1.PersistentVolumeClaim
	if err := c.Client.Get(ctx, client.ObjectKeyFromObject(claim), &pv); err != nil || pv.Status.Phase != corev1.ClaimBound {
		t.Errorf("claim: %v %s", err, pv.Status.Phase)
	}
	// The default StorageClass grows a claim online: the kubelet grows
	// the filesystem the pod sees.
	if err := c.Client.Patch(ctx, claim, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"resources":{"requests":{"storage":"2Gi"}}}}`))); err != nil {
		t.Fatal(err)
	}
	grew := time.Now()
	two := resource.MustParse("2Gi")
	// The volume grown, the kubelet grows the mounted filesystem when it
	// next syncs the pod: at once on a change to the pod, else within its
	// sync period (a minute). The annotation is such a change.
	prompted := false
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(claim), &pv); err != nil {
			return false, nil
		}
		if size := pv.Status.Capacity[corev1.ResourceStorage]; size.Cmp(two) >= 0 {
			return true, nil
		}
		pending := slices.ContainsFunc(pv.Status.Conditions, func(c corev1.PersistentVolumeClaimCondition) bool {
			return c.Type == corev1.PersistentVolumeClaimFileSystemResizePending && c.Status == corev1.ConditionTrue
		})
		if pending && !prompted {
			prompted = c.Client.Patch(ctx, pod, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"grown":"2Gi"}}}`))) == nil
		}
		return false, nil
	}); err != nil {
		t.Errorf("claim not grown to 2Gi: %+v", pv.Status)
	}
	kubectl = exec.Command(filepath.Join(c.BinDir, "kubectl"), "exec", "checks", "--", "sh", "-c", "df -Pk /disk | awk 'NR==2 {print $2}'; cat /disk/file")
	kubectl.Env = append(os.Environ(), "KUBECONFIG="+c.Kubeconfig)
	df, _ := kubectl.Output()
	var kib int64
	if _, err := fmt.Sscan(string(df), &kib); err != nil || kib<<10 <= 19<<30/10 || !strings.HasSuffix(string(df), "written\n") {
		t.Errorf("df and the file in the pod after growing the claim to 2Gi: %q", df)
	}
	t.Logf("claim grown to 2Gi, df in the pod shows it, in %s", time.Since(grew).Round(time.Millisecond))

	dir, nodesDir := c.Dir, c.NodesDir
	stopped = true
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{dir, nodesDir} {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("%s remains: %v", d, err)
		}
	}
	loops, _ := exec.Command("losetup", "-a").Output()
	if strings.Contains(string(loops), dir) {
		t.Errorf("loop devices of the cluster remain:\n%s", loops)
	}
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	for _, d := range []string{dir, nodesDir} {
		if strings.Contains(string(mounts), d+"/") {
			t.Errorf("mounts under %s remain", d)
		}
	}
	if out, _ := exec.Command("ip", "netns", "list").Output(); strings.Contains(string(out), "bosh-injector-") {
		// Another package's cluster may run at the same time: only this
		// one's directory must be gone from every process.
		t.Logf("network namespaces now: %s", out)
	}
	if now, _ := cluster.MachineSysctls(); now != before {
		t.Errorf("sysctls after teardown:\n%s\nbefore:\n%s", now, before)
	}
	for _, d := range []string{dir, nodesDir + "/"} {
		if out, _ := exec.Command("pgrep", "-af", d).Output(); len(out) > 0 {
			t.Errorf("processes of the cluster remain:\n%s", out)
		}
	}
}
