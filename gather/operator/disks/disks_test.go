package disks_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/bosh-injector/bosh-injector/gather/model/instance"
	"github.com/bosh-injector/bosh-injector/gather/names"
	"github.com/bosh-injector/bosh-injector/gather/operator/disks"
	"github.com/bosh-injector/bosh-injector/test/fixtures"
)

// node plays the kubelet (pods Ready), the volume binder (claims Bound at
// their requested size) and the resizer (a larger request becomes the
// capacity after a moment), and records what it saw.
type node struct {
	mu sync.Mutex
	// grown are the claims in the order their request grew; inFlight the
	// most claims seen growing at once; drainedFirst whether each grown
	// claim's pod had been replaced when its request grew.
	grown        []string
	inFlight     int
	drainedFirst []bool
	podUID       map[string]string
}

func (n *node) run(ns string) {
	n.podUID = map[string]string{}
	c, cancel := context.WithCancel(ctx)
	DeferCleanup(cancel)
	growing := map[string]time.Time{}
	go func() {
		defer GinkgoRecover()
		for c.Err() == nil {
			var pods corev1.PodList
			if err := cp.Client.List(c, &pods, client.InNamespace(ns)); err == nil {
				for i := range pods.Items {
					p := &pods.Items[i]
					if p.Status.Phase != corev1.PodRunning {
						p.Status.Phase = corev1.PodRunning
						p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
						_ = cp.Client.Status().Update(c, p)
					}
				}
			}
			var claims corev1.PersistentVolumeClaimList
			if err := cp.Client.List(c, &claims, client.InNamespace(ns)); err == nil {
				now := 0
				for i := range claims.Items {
					cl := &claims.Items[i]
					spec := cl.Spec.Resources.Requests[corev1.ResourceStorage]
					capacity, bound := cl.Status.Capacity[corev1.ResourceStorage]
					switch {
					case cl.Status.Phase != corev1.ClaimBound || !bound:
						cl.Status.Phase = corev1.ClaimBound
						cl.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: spec}
						_ = cp.Client.Status().Update(c, cl)
					case spec.Cmp(capacity) > 0:
						now++
						if _, ok := growing[cl.Name]; !ok {
							growing[cl.Name] = time.Now()
							n.sawGrow(c, ns, cl)
						} else if time.Since(growing[cl.Name]) > 300*time.Millisecond {
							cl.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: spec}
							if cp.Client.Status().Update(c, cl) == nil {
								delete(growing, cl.Name)
							}
						}
					}
				}
				n.mu.Lock()
				n.inFlight = max(n.inFlight, now)
				n.mu.Unlock()
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
}

// sawGrow records a claim whose request grew, and whether its pod is
// another than the one the controller drained.
func (n *node) sawGrow(c context.Context, ns string, cl *corev1.PersistentVolumeClaim) {
	var pod corev1.Pod
	drained := cl.Annotations[names.AnnotationDrainedPod]
	err := cp.Client.Get(c, client.ObjectKey{Namespace: ns, Name: cl.Name[len("store-"):]}, &pod)
	n.mu.Lock()
	defer n.mu.Unlock()
	n.grown = append(n.grown, cl.Name)
	n.drainedFirst = append(n.drainedFirst, drained != "" && (err != nil || string(pod.UID) != drained))
}

func (n *node) snapshot() ([]string, int, []bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.grown...), n.inFlight, append([]bool(nil), n.drainedFirst...)
}

var _ = Describe("the disk controller", func() {
	var ns string
	var kube *node
	var offset atomic.Int64
	var stopOperator context.CancelFunc

	// startOperator runs the controller in a manager of its own, as an
	// operator process would; the function returned stops it.
	startOperator := func() context.CancelFunc {
		GinkgoHelper()
		mgr, err := ctrl.NewManager(cp.Config, ctrl.Options{Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
			Controller: config.Controller{SkipNameValidation: ptr.To(true)}})
		Expect(err).NotTo(HaveOccurred())
		Expect((&disks.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder("disks-test"),
			Log: GinkgoLogr, Config: disks.Config{Retention: time.Hour},
			Now: func() time.Time { return time.Now().Add(time.Duration(offset.Load())) },
		}).SetupWithManager(mgr)).To(Succeed())
		mctx, cancel := context.WithCancel(ctx)
		DeferCleanup(cancel)
		done := make(chan struct{})
		go func() {
			defer GinkgoRecover()
			defer close(done)
			Expect(mgr.Start(mctx)).To(Succeed())
		}()
		return func() { cancel(); <-done }
	}

	BeforeEach(func() {
		namespace := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "disks-"}}
		Expect(cp.Client.Create(ctx, namespace)).To(Succeed())
		ns = namespace.Name
		offset.Store(0)
		stopOperator = startOperator()
		kube = &node{}
		kube.run(ns)
	})

	claim := func(name string) func(Gomega) *corev1.PersistentVolumeClaim {
		return func(g Gomega) *corev1.PersistentVolumeClaim {
			var c corev1.PersistentVolumeClaim
			g.Expect(cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &c)).To(Succeed())
			return &c
		}
	}
	scale := func(n int32) {
		GinkgoHelper()
		var s appsv1.StatefulSet
		Expect(cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "d-db"}, &s)).To(Succeed())
		// A patch: the StatefulSet controller writes its status meanwhile.
		patch := client.MergeFrom(s.DeepCopy())
		s.Spec.Replicas = ptr.To(n)
		Expect(cp.Client.Patch(ctx, &s, patch)).To(Succeed())
	}
	orphaned := HaveField("Labels", HaveKeyWithValue(names.LabelOrphaned, "true"))

	It("orphans a scaled-down instance's claim, adopts it back on scale-up, orphans all on deletion and deletes them after the retention", func() {
		Expect(cp.Client.Create(ctx, fixtures.DiskStatefulSet(ns, "any", 3))).To(Succeed())
		Eventually(claim("store-d-db-2")).Should(HaveField("Status.Phase", corev1.ClaimBound))

		scale(2)
		Eventually(claim("store-d-db-2")).Should(And(orphaned,
			HaveField("Annotations", HaveKeyWithValue(names.AnnotationOrphanedInstance, "db/"+instance.ID("d", "db", 2)+" (2)")),
			HaveField("Annotations", HaveKey(names.AnnotationOrphanedAt))))
		Consistently(claim("store-d-db-1"), "300ms").ShouldNot(orphaned)

		// The StatefulSet mounts the claim of its name again: the instance
		// gets its data back (the director would make a new disk).
		scale(3)
		Eventually(claim("store-d-db-2")).ShouldNot(orphaned)

		Expect(cp.Client.Delete(ctx, fixtures.DiskStatefulSet(ns, "any", 3))).To(Succeed())
		for i := range 3 {
			Eventually(claim(fmt.Sprintf("store-d-db-%d", i))).Should(orphaned)
		}

		offset.Store(int64(2 * time.Hour))
		// Any change to the deployment's claims looks again; the timer
		// the controller set is an hour away.
		c := claim("store-d-db-0")(Default)
		patch := client.MergeFrom(c.DeepCopy())
		c.Annotations["touch"] = "1"
		Expect(cp.Client.Patch(ctx, c, patch)).To(Succeed())
		Eventually(func() []corev1.PersistentVolumeClaim {
			var list corev1.PersistentVolumeClaimList
			Expect(cp.Client.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
			var live []corev1.PersistentVolumeClaim
			for _, c := range list.Items {
				if c.DeletionTimestamp == nil {
					live = append(live, c)
				}
			}
			return live
		}).Should(BeEmpty())
	})

	It("grows each instance's claim after draining it, one instance at a time, in the deploy's order, across an operator restart", func() {
		class := ns + "-grows"
		Expect(cp.Client.Create(ctx, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: class},
			Provisioner: "example.com/none", AllowVolumeExpansion: ptr.To(true)})).To(Succeed())
		s := fixtures.DiskStatefulSet(ns, class, 3)
		Expect(cp.Client.Create(ctx, s)).To(Succeed())
		for i := range 3 {
			Eventually(claim(fmt.Sprintf("store-d-db-%d", i))).Should(HaveField("Status.Phase", corev1.ClaimBound))
		}
		Expect(cp.Client.Get(ctx, client.ObjectKeyFromObject(s), s)).To(Succeed())
		patch := client.MergeFrom(s.DeepCopy())
		s.Annotations = map[string]string{names.AnnotationDiskSizes: `{"store":"2Gi"}`}
		Expect(cp.Client.Patch(ctx, s, patch)).To(Succeed())

		// The operator restarts in the middle: the claims and their
		// annotations say where the resize was.
		Eventually(func() int { grown, _, _ := kube.snapshot(); return len(grown) }, "20s").Should(Equal(1))
		stopOperator()
		stopOperator = startOperator()

		two := resource.MustParse("2Gi")
		for i := range 3 {
			Eventually(claim(fmt.Sprintf("store-d-db-%d", i)), "20s").Should(And(
				HaveField("Status.Capacity", HaveKeyWithValue(corev1.ResourceStorage, two)),
				HaveField("Annotations", Not(HaveKey(names.AnnotationDrainedPod)))))
		}
		grown, inFlight, drainedFirst := kube.snapshot()
		// One canary, then max_in_flight 1, from the highest ordinal down
		// as a deploy's partition releases instances.
		Expect(grown).To(Equal([]string{"store-d-db-2", "store-d-db-1", "store-d-db-0"}))
		Expect(inFlight).To(Equal(1))
		Expect(drainedFirst).To(Equal([]bool{true, true, true}))
	})

	It("drains no instance while one outside its batch is not Ready (the deploy updating it), then goes on", func() {
		class := ns + "-waits"
		Expect(cp.Client.Create(ctx, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: class},
			Provisioner: "example.com/none", AllowVolumeExpansion: ptr.To(true)})).To(Succeed())
		s := fixtures.DiskStatefulSet(ns, class, 2)
		Expect(cp.Client.Create(ctx, s)).To(Succeed())
		for i := range 2 {
			Eventually(claim(fmt.Sprintf("store-d-db-%d", i))).Should(HaveField("Status.Phase", corev1.ClaimBound))
		}
		// Index 0 (the second batch) not Ready, as the deploy controller's
		// rollout of a manifest applied with the larger disk leaves it.
		var pod corev1.Pod
		Eventually(func(g Gomega) {
			g.Expect(cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "d-db-0"}, &pod)).To(Succeed())
			g.Expect(pod.Status.Phase).To(Equal(corev1.PodRunning))
			pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: metav1.Now()}}
			g.Expect(cp.Client.Status().Update(ctx, &pod)).To(Succeed())
		}).Should(Succeed())
		Expect(cp.Client.Get(ctx, client.ObjectKeyFromObject(s), s)).To(Succeed())
		patch := client.MergeFrom(s.DeepCopy())
		s.Annotations = map[string]string{names.AnnotationDiskSizes: `{"store":"2Gi"}`}
		Expect(cp.Client.Patch(ctx, s, patch)).To(Succeed())
		Consistently(claim("store-d-db-1"), "3s").Should(HaveField("Annotations", Not(HaveKey(names.AnnotationDrainedPod))))

		Expect(cp.Client.Get(ctx, client.ObjectKeyFromObject(&pod), &pod)).To(Succeed())
		pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
		Expect(cp.Client.Status().Update(ctx, &pod)).To(Succeed())
		two := resource.MustParse("2Gi")
		for i := range 2 {
			Eventually(claim(fmt.Sprintf("store-d-db-%d", i)), "20s").Should(HaveField("Status.Capacity", HaveKeyWithValue(corev1.ResourceStorage, two)))
		}
		grown, inFlight, _ := kube.snapshot()
		Expect(grown).To(Equal([]string{"store-d-db-1", "store-d-db-0"}))
		Expect(inFlight).To(Equal(1))
	})

	It("stops before draining anything, naming the StorageClass, when the class cannot grow", func() {
		fixed := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{GenerateName: "fixed-"}, Provisioner: "example.com/none"}
		Expect(cp.Client.Create(ctx, fixed)).To(Succeed())
		s := fixtures.DiskStatefulSet(ns, fixed.Name, 1)
		Expect(cp.Client.Create(ctx, s)).To(Succeed())
		Eventually(claim("store-d-db-0")).Should(HaveField("Status.Phase", corev1.ClaimBound))
		var pod corev1.Pod
		Eventually(func() error { return cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "d-db-0"}, &pod) }).Should(Succeed())

		Expect(cp.Client.Get(ctx, client.ObjectKeyFromObject(s), s)).To(Succeed())
		patch := client.MergeFrom(s.DeepCopy())
		s.Annotations = map[string]string{names.AnnotationDiskSizes: `{"store":"2Gi"}`}
		Expect(cp.Client.Patch(ctx, s, patch)).To(Succeed())
		Eventually(func(g Gomega) string {
			g.Expect(cp.Client.Get(ctx, client.ObjectKeyFromObject(s), s)).To(Succeed())
			return s.Annotations[names.AnnotationDiskResize]
		}).Should(ContainSubstring(fmt.Sprintf("StorageClass '%s' does not allow volume expansion", fixed.Name)))
		var now corev1.Pod
		Expect(cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "d-db-0"}, &now)).To(Succeed())
		Expect(now.UID).To(Equal(pod.UID), "the instance was not drained")
	})

	It("replaces the StatefulSet to add and remove a disk, keeping pods and claims, then drains each instance so that it mounts them, across an operator restart", func() {
		s := fixtures.DiskStatefulSet(ns, "any", 2)
		Expect(cp.Client.Create(ctx, s)).To(Succeed())
		pods := map[string]types.UID{}
		for i := range 2 {
			Eventually(claim(fmt.Sprintf("store-d-db-%d", i))).Should(HaveField("Status.Phase", corev1.ClaimBound))
			var pod corev1.Pod
			Eventually(func() error {
				return cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: fmt.Sprintf("d-db-%d", i)}, &pod)
			}).Should(Succeed())
			pods[pod.Name] = pod.UID
		}
		Expect(cp.Client.Get(ctx, client.ObjectKeyFromObject(s), s)).To(Succeed())
		old := s.UID

		// What the webhook records for an apply that replaces the
		// persistent_disk with a named disk.
		index := *s.Spec.VolumeClaimTemplates[0].DeepCopy()
		index.Name = names.NamedDiskVolume("index")
		raw, err := json.Marshal([]corev1.PersistentVolumeClaim{index})
		Expect(err).NotTo(HaveOccurred())
		patch := client.MergeFrom(s.DeepCopy())
		s.Annotations = map[string]string{names.AnnotationDiskTemplates: string(raw)}
		Expect(cp.Client.Patch(ctx, s, patch)).To(Succeed())

		// Deleted leaving its pods; the operator restarts before the
		// garbage collector (which this control plane does not run, so
		// the spec plays it) has let the StatefulSet go.
		Eventually(func(g Gomega) *metav1.Time {
			g.Expect(cp.Client.Get(ctx, client.ObjectKeyFromObject(s), s)).To(Succeed())
			return s.DeletionTimestamp
		}).ShouldNot(BeNil())
		Expect(s.Finalizers).To(ContainElement(metav1.FinalizerOrphanDependents))
		stopOperator()
		stopOperator = startOperator()
		for _, list := range []client.ObjectList{&corev1.PodList{}, &appsv1.ControllerRevisionList{}} {
			Expect(cp.Client.List(ctx, list, client.InNamespace(ns))).To(Succeed())
			Expect(meta.EachListItem(list, func(o runtime.Object) error {
				obj := o.(client.Object)
				patch := client.MergeFrom(obj.DeepCopyObject().(client.Object))
				obj.SetOwnerReferences(nil)
				return cp.Client.Patch(ctx, obj, patch)
			})).To(Succeed())
		}
		patch = client.MergeFrom(s.DeepCopy())
		s.Finalizers = nil
		Expect(cp.Client.Patch(ctx, s, patch)).To(Succeed())

		// Created again with the new disk; each instance drained and its
		// new pod mounting it; the removed disk's claims orphaned.
		Eventually(func(g Gomega) {
			var now appsv1.StatefulSet
			g.Expect(cp.Client.Get(ctx, client.ObjectKeyFromObject(s), &now)).To(Succeed())
			g.Expect(now.UID).NotTo(Equal(old))
			g.Expect(now.Spec.VolumeClaimTemplates).To(ConsistOf(HaveField("Name", "disk-index")))
			g.Expect(now.Annotations).NotTo(HaveKey(names.AnnotationDiskTemplates))
			g.Expect(now.Annotations).NotTo(HaveKey(names.AnnotationDiskRemount))
		}, "20s").Should(Succeed())
		for i := range 2 {
			var pod corev1.Pod
			Expect(cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: fmt.Sprintf("d-db-%d", i)}, &pod)).To(Succeed())
			Expect(pod.UID).NotTo(Equal(pods[pod.Name]), "instance %d drained", i)
			Expect(pod.Spec.Volumes).To(ContainElement(HaveField("PersistentVolumeClaim.ClaimName", fmt.Sprintf("disk-index-d-db-%d", i))))
			Expect(pod.Spec.Volumes).NotTo(ContainElement(HaveField("Name", "store")))
			Eventually(claim(fmt.Sprintf("store-d-db-%d", i))).Should(And(orphaned,
				HaveField("Annotations", HaveKeyWithValue(names.AnnotationOrphanedInstance, fmt.Sprintf("db/%s (%d)", instance.ID("d", "db", i), i)))))
			Consistently(claim(fmt.Sprintf("disk-index-d-db-%d", i)), "200ms").ShouldNot(orphaned)
		}
		var records corev1.ConfigMapList
		Expect(cp.Client.List(ctx, &records, client.InNamespace(ns), client.HasLabels{names.LabelDiskChange})).To(Succeed())
		Expect(records.Items).To(BeEmpty())
	})
})
