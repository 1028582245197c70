package e2e_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bosh-injector/bosh-injector/gather/operator/status"
	"github.com/bosh-injector/bosh-injector/inject"
	"github.com/bosh-injector/bosh-injector/test/fixtures"
	"github.com/bosh-injector/bosh-injector/test/walkthrough"
)

// TestDisklessStore runs a job asking for the persistent disk in a group
// that has none, as a director does (BPM makes /var/vcap/store/<job> on
// the VM's own disk): the pod is admitted with an emptyDir store bounded
// by the group's ephemeral disk, the job keeps its data there, and the
// gathering warns that the data lives only as long as the pod, naming job
// and group (issue 48).
func TestDisklessStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w, releaseURL, _ := startWalkthrough(t)
	const ns = "diskless"
	if gst, err := w.Deploy(ctx, ns, fixtures.Deployment("diskless", releaseURL)); err != nil || gst.State != status.ReasonGathered {
		t.Fatalf("gathering: %+v %v", gst, err)
	}
	p, err := w.StartInstance(ctx, ns, walkthrough.Instance{Deployment: "diskless", Group: "cache", AZIndex: 1, Container: "pgstore-pgstore",
		Image: fixtures.Image(releaseURL, "store")})
	if err != nil {
		t.Fatal(err)
	}
	logs, err := p.WaitForLog(ctx, "pgstore-pgstore", "/var/vcap/store/pgstore:", 2*time.Minute)
	if _, rerr := w.Report(ctx, p); err != nil || rerr != nil {
		t.Fatalf("%v %v\n%s", err, rerr, logs)
	}
	var pod corev1.Pod
	if err := w.Client.Get(ctx, p.Key(), &pod); err != nil {
		t.Fatal(err)
	}
	var store *corev1.Volume
	for i, v := range pod.Spec.Volumes {
		if v.Name == inject.VolumeStore {
			store = &pod.Spec.Volumes[i]
		}
	}
	if store == nil || store.EmptyDir == nil || store.EmptyDir.SizeLimit == nil || store.EmptyDir.SizeLimit.Cmp(resource.MustParse("256Mi")) != 0 {
		t.Errorf("store volume %+v, want an emptyDir of 256Mi", store)
	}
	// The job writes its data where it would on a VM without a disk.
	if out, err := w.Kubectl(ctx, "exec", "-n", ns, pod.Name, "-c", "pgstore-pgstore", "--", "sh", "-c",
		"touch /var/vcap/store/pgstore/kept && ls /var/vcap/store/pgstore"); err != nil || !strings.Contains(out, "kept") {
		t.Errorf("writing the store: %v\n%s", err, out)
	}
	var events corev1.EventList
	if err := w.Client.List(ctx, &events, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	warned := false
	for _, e := range events.Items {
		warned = warned || e.Type == corev1.EventTypeWarning && strings.Contains(e.Message, "pgstore") && strings.Contains(e.Message, "cache") &&
			strings.Contains(e.Message, "lives only as long as the pod")
	}
	if !warned {
		var all []string
		for _, e := range events.Items {
			all = append(all, e.Reason+": "+e.Message)
		}
		t.Errorf("no warning naming job pgstore and group cache:\n%s", strings.Join(all, "\n"))
	}
}
