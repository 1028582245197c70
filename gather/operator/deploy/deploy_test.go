package deploy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/bosh-injector/bosh-injector/gather/names"
	"github.com/bosh-injector/bosh-injector/gather/operator/deploy"
	"github.com/bosh-injector/bosh-injector/gather/operator/runner"
	"github.com/bosh-injector/bosh-injector/gather/update"
)

// kubelet plays the node for the specs' pods: it reports each new pod
// Running and Ready unless broken says it is not, and records the order
// in which it first saw each pod.
type kubelet struct {
	mu     sync.Mutex
	seen   map[types.UID]int
	order  []string
	broken func(*corev1.Pod) bool
}

func (k *kubelet) run(ns string) {
	k.seen = map[types.UID]int{}
	c, cancel := context.WithCancel(ctx)
	DeferCleanup(cancel)
	go func() {
		defer GinkgoRecover()
		for c.Err() == nil {
			var pods corev1.PodList
			if err := cp.Client.List(c, &pods, client.InNamespace(ns)); err == nil {
				for i := range pods.Items {
					k.observe(c, &pods.Items[i])
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
}

func (k *kubelet) observe(c context.Context, p *corev1.Pod) {
	k.mu.Lock()
	if _, ok := k.seen[p.UID]; !ok {
		k.seen[p.UID] = len(k.order)
		k.order = append(k.order, p.Name)
	}
	broken := k.broken != nil && k.broken(p)
	k.mu.Unlock()
	if broken || p.Status.Phase == corev1.PodRunning {
		return
	}
	p.Status.Phase = corev1.PodRunning
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
	_ = cp.Client.Status().Update(c, p)
}

func (k *kubelet) pods() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.order)
}

func (k *kubelet) setBroken(f func(*corev1.Pod) bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.broken = f
}

var _ = Describe("the deploy controller", func() {
	var ns string
	var kube *kubelet
	manifestKey := func() client.ObjectKey { return client.ObjectKey{Namespace: ns, Name: "d-manifest"} }

	BeforeEach(func() {
		namespace := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "deploy-"}}
		Expect(cp.Client.Create(ctx, namespace)).To(Succeed())
		ns = namespace.Name
		mgr, err := ctrl.NewManager(cp.Config, ctrl.Options{Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
			// Each spec runs its own manager in this process.
			Controller: config.Controller{SkipNameValidation: ptr.To(true)}})
		Expect(err).NotTo(HaveOccurred())
		Expect((&deploy.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder("deploy-test"),
			Log: GinkgoLogr}).SetupWithManager(mgr)).To(Succeed())
		mctx, cancel := context.WithCancel(ctx)
		DeferCleanup(cancel)
		go func() {
			defer GinkgoRecover()
			Expect(mgr.Start(mctx)).To(Succeed())
		}()
		kube = &kubelet{}
		kube.run(ns)
	})

	// accept records versions and plan as the job runner does after a
	// gathering, creating the manifest Secret the first time.
	accept := func(versions map[string]int, plan update.Plan) {
		GinkgoHelper()
		data, err := json.Marshal(runner.Status{State: runner.ReasonGathered, Versions: versions, Plan: plan})
		Expect(err).NotTo(HaveOccurred())
		var s corev1.Secret
		if err := cp.Client.Get(ctx, manifestKey(), &s); err != nil {
			s = corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "d-manifest", Namespace: ns, Labels: map[string]string{names.LabelDeployment: "d"}},
				Data: map[string][]byte{names.ManifestKey: []byte("name: d\n")}}
			Expect(cp.Client.Create(ctx, &s)).To(Succeed())
		}
		patch := client.MergeFrom(s.DeepCopy())
		if s.Annotations == nil {
			s.Annotations = map[string]string{}
		}
		s.Annotations[names.AnnotationStatus] = string(data)
		Expect(cp.Client.Patch(ctx, &s, patch)).To(Succeed())
	}
	statefulSet := func(group string, replicas int32) {
		GinkgoHelper()
		labels := map[string]string{names.LabelDeployment: "d", names.LabelInstanceGroup: group}
		Expect(cp.Client.Create(ctx, &appsv1.StatefulSet{
			ObjectMeta: metav1.ObjectMeta{Name: group, Namespace: ns},
			Spec: appsv1.StatefulSetSpec{Replicas: ptr.To(replicas), Selector: &metav1.LabelSelector{MatchLabels: labels},
				PodManagementPolicy: appsv1.ParallelPodManagement,
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}},
		})).To(Succeed())
	}
	status := func() (deploy.Status, error) {
		var s corev1.Secret
		err := cp.Client.Get(ctx, manifestKey(), &s)
		return deploy.StatusOf(&s), err
	}
	config := func(serial bool, watch string) update.Config {
		w, err := update.ParseWatch(watch)
		Expect(err).NotTo(HaveOccurred())
		return update.Config{Canaries: "1", MaxInFlight: "1", CanaryWatch: w, UpdateWatch: w, Serial: serial}
	}

	It("updates serial groups one after another and serial: false neighbours together, canary first", func() {
		for _, g := range []string{"a", "b", "c"} {
			statefulSet(g, 2)
		}
		plan := update.Plan{{Name: "a", Update: config(true, "0-30000")}, {Name: "b", Update: config(false, "0-30000")}, {Name: "c", Update: config(false, "0-30000")}}
		accept(map[string]int{"a": 1, "b": 1, "c": 1}, plan)
		Eventually(kube.pods).Should(HaveLen(6))
		Eventually(status).Should(HaveField("Phase", deploy.PhaseDeployed))
		first := len(kube.pods())

		updated := time.Now().Add(-time.Second)
		accept(map[string]int{"a": 2, "b": 2, "c": 2}, plan)
		Eventually(status).WithTimeout(30 * time.Second).Should(And(HaveField("Phase", deploy.PhaseDeployed), HaveField("Updated", 6), HaveField("Total", 6)))
		created := kube.pods()[first:]
		Expect(created).To(HaveLen(6))
		at := func(p string) int { return slices.Index(created, p) }
		// a's canary (its highest ordinal), then a's other, then b and c
		// each canary first.
		Expect(created[:2]).To(Equal([]string{"a-1", "a-0"}))
		Expect(at("b-1")).To(BeNumerically("<", at("b-0")))
		Expect(at("c-1")).To(BeNumerically("<", at("c-0")))
		// b's and c's canaries are released together, before either's
		// batch: the controller's release Events, in the order it made
		// them (the StatefulSet controller may create one set's pod later).
		released := func(group, what string) time.Time {
			GinkgoHelper()
			var events corev1.EventList
			Expect(cp.Client.List(ctx, &events, client.InNamespace(ns))).To(Succeed())
			for _, e := range events.Items {
				if e.Reason == deploy.ReasonUpdating && strings.HasPrefix(e.Message, fmt.Sprintf("instance group '%s': updating %s", group, what)) &&
					e.EventTime.Time.After(updated) {
					return e.EventTime.Time
				}
			}
			Fail(fmt.Sprintf("no %s Event releasing %s of %s", deploy.ReasonUpdating, what, group))
			return time.Time{}
		}
		Expect(released("c", "canary")).To(BeTemporally("<", released("b", "batch")))
		Expect(released("b", "canary")).To(BeTemporally("<", released("c", "batch")))
		for _, g := range []string{"a", "b", "c"} {
			var sts appsv1.StatefulSet
			Expect(cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: g}, &sts)).To(Succeed())
			Expect(sts.Spec.Template.Annotations).To(HaveKeyWithValue(names.AnnotationResolvedVersion, "2"))
			Expect(*sts.Spec.UpdateStrategy.RollingUpdate.Partition).To(BeZero())
		}
	})

	It("stops at an instance not running by its watch time's maximum, holding the others, until a retry", func() {
		statefulSet("a", 1)
		statefulSet("b", 3)
		plan := update.Plan{{Name: "a", Update: config(true, "0-30000")}, {Name: "b", Update: config(true, "500-1500")}}
		accept(map[string]int{"a": 1, "b": 1}, plan)
		Eventually(status).Should(HaveField("Phase", deploy.PhaseDeployed))
		var before corev1.PodList
		Expect(cp.Client.List(ctx, &before, client.InNamespace(ns))).To(Succeed())

		// b's new version never becomes Ready.
		kube.setBroken(func(p *corev1.Pod) bool {
			return p.Labels[names.LabelInstanceGroup] == "b" && p.Annotations[names.AnnotationResolvedVersion] == "2"
		})
		accept(map[string]int{"a": 1, "b": 2}, plan)
		Eventually(status).Should(HaveField("Phase", deploy.PhaseFailed))
		st, err := status()
		Expect(err).NotTo(HaveOccurred())
		Expect(st.Message).To(HavePrefix("'b (b-2)' is not running after update."))
		Expect(st.Message).To(ContainSubstring("Not Ready within 1.5s."))
		Expect(st.Updated).To(Equal(0))
		Expect(st.Total).To(Equal(3))
		var events corev1.EventList
		Expect(cp.Client.List(ctx, &events, client.InNamespace(ns))).To(Succeed())
		Expect(events.Items).To(ContainElement(And(HaveField("Reason", deploy.ReasonDeployFailed),
			HaveField("Message", ContainSubstring("deploy stopped at instance group 'b': 'b (b-2)' is not running after update.")))))
		// The others keep their pods, held by the partition.
		var sts appsv1.StatefulSet
		Expect(cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "b"}, &sts)).To(Succeed())
		Expect(*sts.Spec.UpdateStrategy.RollingUpdate.Partition).To(BeEquivalentTo(2))
		Consistently(func() ([]types.UID, error) {
			var pods corev1.PodList
			err := cp.Client.List(ctx, &pods, client.InNamespace(ns))
			var uids []types.UID
			for _, p := range pods.Items {
				if p.Name != "b-2" {
					uids = append(uids, p.UID)
				}
			}
			return uids, err
		}, 2*time.Second).Should(ConsistOf(uidsBut(before, "b-2")))

		// Retried once the instance runs, the deploy completes.
		kube.setBroken(nil)
		var s corev1.Secret
		Expect(cp.Client.Get(ctx, manifestKey(), &s)).To(Succeed())
		patch := client.MergeFrom(s.DeepCopy())
		s.Annotations[names.AnnotationRetryDeploy] = "1"
		Expect(cp.Client.Patch(ctx, &s, patch)).To(Succeed())
		Eventually(status).WithTimeout(20 * time.Second).Should(And(HaveField("Phase", deploy.PhaseDeployed), HaveField("Retry", "1"), HaveField("Updated", 3)))
		Expect(cp.Client.Get(ctx, manifestKey(), &s)).To(Succeed())
		Expect(s.Labels).To(HaveKeyWithValue(names.LabelDeployState, deploy.PhaseDeployed))
	})

	It("refuses a StatefulSet that updates on delete, naming it", func() {
		statefulSet("a", 1)
		var sts appsv1.StatefulSet
		Expect(cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "a"}, &sts)).To(Succeed())
		sts.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType}
		Expect(cp.Client.Update(ctx, &sts)).To(Succeed())
		plan := update.Plan{{Name: "a", Update: config(true, "0-1000")}}
		accept(map[string]int{"a": 2}, plan)
		Eventually(status).Should(And(HaveField("Phase", deploy.PhaseFailed),
			HaveField("Message", fmt.Sprintf("StatefulSet %s updates on delete only: the deploy cannot release its instances; use the RollingUpdate strategy", "a"))))
	})
})

// uidsBut are the UIDs of pods but the one named.
func uidsBut(pods corev1.PodList, name string) []types.UID {
	var out []types.UID
	for _, p := range pods.Items {
		if p.Name != name {
			out = append(out, p.UID)
		}
	}
	return out
}
