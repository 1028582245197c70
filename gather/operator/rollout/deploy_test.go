package rollout_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	kretry "k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/bosh-injector/bosh-injector/gather/model/update"
	"github.com/bosh-injector/bosh-injector/gather/names"
	"github.com/bosh-injector/bosh-injector/gather/operator/rollout"
	"github.com/bosh-injector/bosh-injector/gather/operator/status"
	"github.com/bosh-injector/bosh-injector/inject/runtime/contract"
)

// kubelet plays the node for the specs' pods: it runs each pod the
// scheduler would (one without scheduling gates), reporting it Running and
// Ready unless broken says it is not (crashing: its container in
// CrashLoopBackOff), and records the order in which it first ran each pod.
type kubelet struct {
	mu       sync.Mutex
	seen     map[types.UID]int
	order    []string
	broken   func(*corev1.Pod) bool
	crashing func(*corev1.Pod) bool
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
	if len(p.Spec.SchedulingGates) > 0 || p.DeletionTimestamp != nil {
		return
	}
	k.mu.Lock()
	if _, ok := k.seen[p.UID]; !ok {
		k.seen[p.UID] = len(k.order)
		k.order = append(k.order, p.Name)
	}
	crashing := k.crashing != nil && k.crashing(p)
	ready := !crashing && (k.broken == nil || !k.broken(p))
	k.mu.Unlock()
	gst := corev1.ConditionFalse
	if ready {
		gst = corev1.ConditionTrue
	}
	if p.Status.Phase == corev1.PodRunning && len(p.Status.Conditions) > 0 && p.Status.Conditions[0].Status == gst &&
		(crashing == (len(p.Status.ContainerStatuses) > 0 && p.Status.ContainerStatuses[0].State.Waiting != nil)) {
		return
	}
	p.Status.Phase, p.Status.PodIP = corev1.PodRunning, "127.0.0.1"
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: gst, LastTransitionTime: metav1.Now()}}
	cs := corev1.ContainerStatus{Name: "c", Image: "busybox", Ready: ready, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}
	if crashing {
		cs.RestartCount = 3
		cs.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 10s restarting failed container"}}
		cs.LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Message: "nats-tls: no such host"}}
	}
	p.Status.ContainerStatuses = []corev1.ContainerStatus{cs}
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

func (k *kubelet) setCrashing(f func(*corev1.Pod) bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.crashing = f
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
		Expect((&rollout.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder("deploy-test"),
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
	acceptBPM := func(versions, bpm map[string]int, plan update.Plan) {
		GinkgoHelper()
		data, err := json.Marshal(status.Gathering{State: status.ReasonGathered, Versions: versions, BPM: bpm, Plan: plan})
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
	accept := func(versions map[string]int, plan update.Plan) {
		GinkgoHelper()
		acceptBPM(versions, nil, plan)
	}
	// azSet creates a StatefulSet of a group's AZ; held, its template
	// carries the deploy's scheduling gate, as the webhook gives the pods
	// of instances not started (here to every pod, so a started
	// instance's recreated pod is released by the controller).
	// containers, when given, replace the one plain container.
	azSet := func(name, group string, az, replicas int32, held bool, containers ...corev1.Container) {
		GinkgoHelper()
		labels := map[string]string{names.LabelDeployment: "d", names.LabelInstanceGroup: group, names.LabelAZIndex: fmt.Sprint(az)}
		if len(containers) == 0 {
			containers = []corev1.Container{{Name: "c", Image: "busybox"}}
		}
		spec := corev1.PodSpec{Containers: containers}
		if held {
			spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: names.SchedulingGateDeploy}}
		}
		Expect(cp.Client.Create(ctx, &appsv1.StatefulSet{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: appsv1.StatefulSetSpec{Replicas: ptr.To(replicas), Selector: &metav1.LabelSelector{MatchLabels: labels},
				PodManagementPolicy: appsv1.ParallelPodManagement,
				Template:            corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec}},
		})).To(Succeed())
	}
	statefulSet := func(group string, replicas int32) {
		GinkgoHelper()
		azSet(group, group, 1, replicas, false)
	}
	get := func(name string) *appsv1.StatefulSet {
		GinkgoHelper()
		var sts appsv1.StatefulSet
		Expect(cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &sts)).To(Succeed())
		return &sts
	}
	retry := func(value string) {
		GinkgoHelper()
		var s corev1.Secret
		Expect(cp.Client.Get(ctx, manifestKey(), &s)).To(Succeed())
		patch := client.MergeFrom(s.DeepCopy())
		s.Annotations[names.AnnotationRetryDeploy] = value
		Expect(cp.Client.Patch(ctx, &s, patch)).To(Succeed())
	}
	// eventsWith are the namespace's Events of reason. The recorder sends
	// Events in the background, after the status the specs wait for may be
	// written: specs wait for the Events they expect with Eventually.
	eventsWith := func(reason string) ([]corev1.Event, error) {
		var events corev1.EventList
		err := cp.Client.List(ctx, &events, client.InNamespace(ns))
		var out []corev1.Event
		for _, e := range events.Items {
			if e.Reason == reason {
				out = append(out, e)
			}
		}
		return out, err
	}
	failedEvents := func() int {
		GinkgoHelper()
		events, err := eventsWith(status.ReasonDeployFailed)
		Expect(err).NotTo(HaveOccurred())
		return len(events)
	}
	// status is the deploy of the versions accepted last, none before the
	// controller started it.
	gst := func() (status.Deploy, error) {
		var s corev1.Secret
		err := cp.Client.Get(ctx, manifestKey(), &s)
		if st, current := status.CurrentDeploy(&s); current {
			return st, err
		}
		return status.Deploy{}, err
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
		Eventually(gst).Should(HaveField("Phase", status.PhaseDeployed))
		first := len(kube.pods())

		updated := time.Now().Add(-time.Second)
		accept(map[string]int{"a": 2, "b": 2, "c": 2}, plan)
		Eventually(gst).WithTimeout(30 * time.Second).Should(And(HaveField("Phase", status.PhaseDeployed), HaveField("Updated", 6), HaveField("Total", 6)))
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
			var at time.Time
			Eventually(func(g Gomega) {
				events, err := eventsWith(status.ReasonUpdating)
				g.Expect(err).NotTo(HaveOccurred())
				for _, e := range events {
					if strings.HasPrefix(e.Message, fmt.Sprintf("instance group '%s': updating %s", group, what)) && e.EventTime.Time.After(updated) {
						at = e.EventTime.Time
						return
					}
				}
				g.Expect(at).NotTo(BeZero(), "no %s Event releasing %s of %s", status.ReasonUpdating, what, group)
			}).Should(Succeed())
			return at
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
		Eventually(gst).Should(HaveField("Phase", status.PhaseDeployed))
		var before corev1.PodList
		Expect(cp.Client.List(ctx, &before, client.InNamespace(ns))).To(Succeed())

		// b's new version never becomes Ready.
		kube.setBroken(func(p *corev1.Pod) bool {
			return p.Labels[names.LabelInstanceGroup] == "b" && p.Annotations[names.AnnotationResolvedVersion] == "2"
		})
		accept(map[string]int{"a": 1, "b": 2}, plan)
		Eventually(gst).Should(HaveField("Phase", status.PhaseFailed))
		st, err := gst()
		Expect(err).NotTo(HaveOccurred())
		Expect(st.Message).To(HavePrefix("'b (b-2)' is not running after update."))
		Expect(st.Message).To(ContainSubstring("Not Ready within 1.5s."))
		Expect(st.Updated).To(Equal(0))
		Expect(st.Total).To(Equal(3))
		Eventually(eventsWith).WithArguments(status.ReasonDeployFailed).Should(ContainElement(
			HaveField("Message", ContainSubstring("deploy stopped at instance group 'b': 'b (b-2)' is not running after update."))))
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

		// The next deploy, though it changes only a, finishes b too: its
		// StatefulSet is not rolled out, whatever its template says.
		accept(map[string]int{"a": 2, "b": 2}, plan)
		Eventually(gst).Should(And(HaveField("Phase", status.PhaseFailed), HaveField("Message", HavePrefix("'b (b-2)' is not running after update."))))
		Expect(get("a").Spec.Template.Annotations).To(HaveKeyWithValue(names.AnnotationResolvedVersion, "2"))

		// Retried once the instance runs, the deploy completes: every
		// instance of b at the new version, no partition left.
		kube.setBroken(nil)
		retry("1")
		Eventually(gst).WithTimeout(20 * time.Second).Should(And(HaveField("Phase", status.PhaseDeployed), HaveField("Retry", "1"), HaveField("Updated", 3)))
		var s corev1.Secret
		Expect(cp.Client.Get(ctx, manifestKey(), &s)).To(Succeed())
		Expect(s.Labels).To(HaveKeyWithValue(names.LabelDeployState, status.PhaseDeployed))
		b := get("b")
		Expect(*b.Spec.UpdateStrategy.RollingUpdate.Partition).To(BeZero())
		Expect(b.Status.UpdatedReplicas).To(BeEquivalentTo(3))
	})

	It("fails at once on an instance whose post-start failed, as the director does, not at its watch time's maximum", func() {
		// The instance's setup server, answering its process container's
		// readiness probe.
		failed := atomic.Bool{}
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if failed.Load() {
				http.Error(w, "post-start of job 'c' failed: exit status 1", contract.FailedStatus)
				return
			}
			http.Error(w, "post-start of job 'c' has not finished", http.StatusServiceUnavailable)
		}))
		DeferCleanup(srv.Close)
		port, err := strconv.Atoi(srv.URL[strings.LastIndex(srv.URL, ":")+1:])
		Expect(err).NotTo(HaveOccurred())
		probe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
			Path: contract.ReadyPath + "?container=c", Port: intstr.FromInt(port)}}}
		azSet("a", "a", 1, 1, false, corev1.Container{Name: "c", Image: "busybox", ReadinessProbe: probe})
		plan := update.Plan{{Name: "a", Update: config(true, "0-60000")}}
		accept(map[string]int{"a": 1}, plan)
		Eventually(gst).Should(HaveField("Phase", status.PhaseDeployed))

		// v2 is not Ready: still starting, the deploy waits; then its
		// post-start fails, and the deploy fails well before 60 s.
		kube.setBroken(func(p *corev1.Pod) bool { return p.Annotations[names.AnnotationResolvedVersion] == "2" })
		accept(map[string]int{"a": 2}, plan)
		Eventually(gst).Should(HaveField("Phase", status.PhaseDeploying))
		Consistently(gst).WithTimeout(3 * time.Second).Should(HaveField("Phase", status.PhaseDeploying))
		failed.Store(true)
		Eventually(gst).WithTimeout(20 * time.Second).Should(HaveField("Phase", status.PhaseFailed))
		st, err := gst()
		Expect(err).NotTo(HaveOccurred())
		Expect(st.Message).To(Equal("'a (a-0)' is not running after update. Review logs for failed jobs: c. c: post-start of job 'c' failed: exit status 1"))
	})

	It("accepts an instance that restarts within its watch time, fails one crash-looping past the maximum", func() {
		statefulSet("a", 1)
		plan := update.Plan{{Name: "a", Update: config(true, "500-8000")}}
		accept(map[string]int{"a": 1}, plan)
		Eventually(gst).Should(HaveField("Phase", status.PhaseDeployed))

		// v2's pod crash-loops for its first second and more, then runs.
		kube.setCrashing(func(p *corev1.Pod) bool {
			return p.Annotations[names.AnnotationResolvedVersion] == "2" && time.Since(p.CreationTimestamp.Time) < 1500*time.Millisecond
		})
		accept(map[string]int{"a": 2}, plan)
		Eventually(gst).WithTimeout(20 * time.Second).Should(And(HaveField("Phase", status.PhaseDeployed), HaveField("Updated", 1)))
		Expect(failedEvents()).To(BeZero())

		// v3's crash-loops for good: failed at the maximum, not before.
		plan = update.Plan{{Name: "a", Update: config(true, "0-2000")}}
		kube.setCrashing(func(p *corev1.Pod) bool { return p.Annotations[names.AnnotationResolvedVersion] == "3" })
		released := time.Now()
		accept(map[string]int{"a": 3}, plan)
		Eventually(gst).WithTimeout(20 * time.Second).Should(HaveField("Phase", status.PhaseFailed))
		Expect(time.Since(released)).To(BeNumerically(">=", 2*time.Second))
		st, err := gst()
		Expect(err).NotTo(HaveOccurred())
		Expect(st.Message).To(Equal("'a (a-0)' is not running after update. Review logs for failed jobs: c. c exited with 1: nats-tls: no such host"))
	})

	It("rolls out a new BPM version alone (rebuilt release images), and is Deployed only when every instance runs", func() {
		statefulSet("a", 2)
		statefulSet("b", 1)
		plan := update.Plan{{Name: "a", Update: config(true, "0-30000")}, {Name: "b", Update: config(true, "0-30000")}}
		acceptBPM(map[string]int{"a": 1, "b": 1}, map[string]int{"a": 1, "b": 1}, plan)
		Eventually(gst).Should(HaveField("Phase", status.PhaseDeployed))
		first := len(kube.pods())

		acceptBPM(map[string]int{"a": 1, "b": 1}, map[string]int{"a": 2, "b": 1}, plan)
		Eventually(gst).WithTimeout(20 * time.Second).Should(And(HaveField("Phase", status.PhaseDeployed), HaveField("Updated", 2), HaveField("Total", 2)))
		Expect(kube.pods()[first:]).To(Equal([]string{"a-1", "a-0"}))
		Expect(get("a").Spec.Template.Annotations).To(HaveKeyWithValue(names.AnnotationBPMVersion, "2"))

		// b changes while a's a-0 stopped running: not Deployed until it
		// runs again, though a is not updated.
		kube.setBroken(func(p *corev1.Pod) bool { return p.Name == "a-0" })
		Eventually(func() (corev1.ConditionStatus, error) {
			var p corev1.Pod
			err := cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "a-0"}, &p)
			return p.Status.Conditions[0].Status, err
		}).Should(Equal(corev1.ConditionFalse))
		acceptBPM(map[string]int{"a": 1, "b": 2}, map[string]int{"a": 2, "b": 2}, plan)
		Eventually(gst).Should(HaveField("Phase", status.PhaseDeploying))
		Consistently(gst, time.Second).Should(HaveField("Phase", status.PhaseDeploying))
		kube.setBroken(nil)
		Eventually(gst).WithTimeout(20 * time.Second).Should(HaveField("Phase", status.PhaseDeployed))
	})

	It("names the groups no StatefulSet runs when Deployed, and deploys them once applied", func() {
		statefulSet("a", 1)
		plan := update.Plan{{Name: "a", Update: config(true, "0-30000"), Instances: ptr.To(1)}, {Name: "b", Update: config(true, "0-30000"), Instances: ptr.To(1)},
			{Name: "none", Update: config(true, "0-30000"), Instances: ptr.To(0)}}
		accept(map[string]int{"a": 1, "b": 1, "none": 1}, plan)
		Eventually(gst).Should(And(HaveField("Phase", status.PhaseDeployed), HaveField("Unplaced", []string{"b"})))
		// Applied later, its pod is held as the webhook holds it.
		azSet("b", "b", 1, 1, true)
		Eventually(gst).WithTimeout(20 * time.Second).Should(And(HaveField("Phase", status.PhaseDeployed), HaveField("Unplaced", BeEmpty()), HaveField("Total", 1)))
		Expect(kube.pods()).To(ContainElement("b-0"))
	})

	It("starts a new deployment's instances in the deploy's order, a failing first canary holding the rest", func() {
		azSet("db", "db", 1, 1, true)
		azSet("api-z1", "api", 1, 2, true)
		azSet("api-z2", "api", 2, 1, true)
		azSet("worker", "worker", 1, 1, true)
		plan := update.Plan{{Name: "db", Update: config(true, "0-1500")}, {Name: "api", Update: config(true, "0-30000")}, {Name: "worker", Update: config(true, "0-30000")}}
		kube.setBroken(func(p *corev1.Pod) bool { return p.Labels[names.LabelInstanceGroup] == "db" })
		accept(map[string]int{"db": 1, "api": 1, "worker": 1}, plan)
		Eventually(gst).Should(And(HaveField("Phase", status.PhaseFailed), HaveField("Message", HavePrefix("'db (db-0)' is not running after update."))))
		Consistently(kube.pods, 500*time.Millisecond).Should(Equal([]string{"db-0"}))
		var pods corev1.PodList
		Expect(cp.Client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{names.LabelInstanceGroup: "api"})).To(Succeed())
		Expect(pods.Items).To(HaveLen(3))
		for _, p := range pods.Items {
			Expect(p.Spec.SchedulingGates).To(ConsistOf(corev1.PodSchedulingGate{Name: names.SchedulingGateDeploy}), p.Name)
		}

		kube.setBroken(nil)
		retry("1")
		// The retry plans again: db runs, api and worker are started.
		Eventually(gst).WithTimeout(30 * time.Second).Should(And(HaveField("Phase", status.PhaseDeployed), HaveField("Updated", 4)))
		// db, then api's canary in its first AZ, the rest of that AZ, the
		// next AZ, then worker.
		Expect(kube.pods()).To(Equal([]string{"db-0", "api-z1-0", "api-z1-1", "api-z2-0", "worker-0"}))

		// A started instance's pod made again is not held.
		var p corev1.Pod
		Expect(cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "api-z1-1"}, &p)).To(Succeed())
		Expect(cp.Client.Delete(ctx, &p)).To(Succeed())
		Eventually(kube.pods).WithTimeout(10 * time.Second).Should(HaveLen(6))
		Expect(kube.pods()[5]).To(Equal("api-z1-1"))
	})

	It("scales as the director: new instances canary first, AZ by AZ; removed ones are forgotten, added again they are new", func() {
		azSet("a-z1", "a", 1, 1, true)
		azSet("a-z2", "a", 2, 1, true)
		plan := update.Plan{{Name: "a", Update: config(true, "0-30000")}}
		accept(map[string]int{"a": 1}, plan)
		Eventually(gst).Should(HaveField("Phase", status.PhaseDeployed))
		Expect(kube.pods()).To(Equal([]string{"a-z1-0", "a-z2-0"}))

		scale := func(name string, replicas int32) {
			GinkgoHelper()
			sts := get(name)
			patch := client.MergeFrom(sts.DeepCopy())
			sts.Spec.Replicas = ptr.To(replicas)
			Expect(cp.Client.Patch(ctx, sts, patch)).To(Succeed())
		}
		// deployedAfter: a deploy started after prev is done.
		deployedAfter := func(prev status.Deploy) {
			GinkgoHelper()
			Eventually(gst).WithTimeout(20 * time.Second).Should(And(HaveField("Phase", status.PhaseDeployed), HaveField("Started", Not(Equal(prev.Started)))))
		}
		// 2 → 5 instances: z1 holds 0, 2, 4, z2 1, 3.
		prev, err := gst()
		Expect(err).NotTo(HaveOccurred())
		scale("a-z1", 3)
		scale("a-z2", 2)
		Eventually(kube.pods).WithTimeout(20 * time.Second).Should(HaveLen(5))
		Expect(kube.pods()[2:]).To(Equal([]string{"a-z1-1", "a-z1-2", "a-z2-1"}))
		deployedAfter(prev)

		// Down to 4: a-z1-2 is removed by the StatefulSet controller; up to
		// 5 again, it is a new instance, started by the deploy.
		scale("a-z1", 2)
		Eventually(func() (map[string]int, error) { st, err := gst(); return st.Instances, err }).Should(HaveKeyWithValue("a-z1", 2))
		prev, err = gst()
		Expect(err).NotTo(HaveOccurred())
		scale("a-z1", 3)
		Eventually(kube.pods).WithTimeout(20 * time.Second).Should(HaveLen(6))
		Expect(kube.pods()[5]).To(Equal("a-z1-2"))
		deployedAfter(prev)
	})

	It("updates a stopped instance without waiting for it to run, as the director does: its pod counts once it runs", func() {
		statefulSet("a", 1)
		// The webhook gives the pods of an instance `stop` recorded the
		// stopped state; here the template does. Stopped, they are never Ready.
		sts := get("a")
		patch := client.MergeFrom(sts.DeepCopy())
		sts.Spec.Template.Annotations = map[string]string{names.AnnotationDesiredState: names.DesiredStopped}
		Expect(cp.Client.Patch(ctx, sts, patch)).To(Succeed())
		kube.setBroken(func(p *corev1.Pod) bool { return p.Annotations[names.AnnotationDesiredState] == names.DesiredStopped })
		plan := update.Plan{{Name: "a", Update: config(true, "0-1500")}}
		accept(map[string]int{"a": 1}, plan)
		Eventually(gst).Should(HaveField("Phase", status.PhaseDeployed))
		accept(map[string]int{"a": 2}, plan)
		Eventually(gst).Should(And(HaveField("Phase", status.PhaseDeployed), HaveField("Updated", 1)))
		var p corev1.Pod
		Expect(cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "a-0"}, &p)).To(Succeed())
		Expect(p.Annotations).To(HaveKeyWithValue(names.AnnotationResolvedVersion, "2"))
		Expect(p.Status.Conditions).To(ContainElement(HaveField("Status", corev1.ConditionFalse)))
	})

	It("scaled up during an update (the StatefulSets applied after the manifest), starts the new instances in its steps and finishes", func() {
		azSet("a-z1", "a", 1, 2, true)
		azSet("a-z2", "a", 2, 2, true)
		accept(map[string]int{"a": 1}, update.Plan{{Name: "a", Update: config(true, "0-30000")}})
		Eventually(gst).Should(HaveField("Phase", status.PhaseDeployed))

		accept(map[string]int{"a": 2}, update.Plan{{Name: "a", Update: config(true, "500-30000")}})
		Eventually(func() (int, error) { st, err := gst(); return len(st.Groups), err }).Should(Equal(1))
		for _, name := range []string{"a-z1", "a-z2"} {
			sts := get(name)
			patch := client.MergeFrom(sts.DeepCopy())
			sts.Spec.Replicas = ptr.To(int32(3))
			Expect(cp.Client.Patch(ctx, sts, patch)).To(Succeed())
		}
		Eventually(gst).WithTimeout(40 * time.Second).Should(And(HaveField("Phase", status.PhaseDeployed),
			HaveField("Instances", Equal(map[string]int{"a-z1": 3, "a-z2": 3}))))
		// Each AZ's new instance ran before the AZ's last replacement.
		ran := kube.pods()
		Expect(slices.Index(ran, "a-z1-2")).To(BeNumerically("<", slices.Index(ran[2:], "a-z1-0")+2), "%v", ran)
		Expect(slices.Index(ran, "a-z2-2")).To(BeNumerically("<", slices.Index(ran[4:], "a-z2-0")+4), "%v", ran)
		for _, name := range []string{"a-z1", "a-z2"} {
			sts := get(name)
			var pods corev1.PodList
			Expect(cp.Client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels(sts.Spec.Selector.MatchLabels))).To(Succeed())
			Expect(pods.Items).To(HaveLen(3))
			for _, p := range pods.Items {
				Expect(p.Labels[appsv1.ControllerRevisionHashLabelKey]).To(Equal(sts.Status.UpdateRevision), p.Name)
				Expect(p.Spec.SchedulingGates).To(BeEmpty(), p.Name)
			}
		}
	})

	// scaledDown: 6 instances over two AZs become 3 with a new version,
	// the scale-down recorded from the user's apply of the objects or,
	// byManifest, from the accepted manifest's instances alone.
	scaledDown := func(byManifest bool) {
		// Two AZs of 3: z1 holds indexes 0, 2, 4 and z2 1, 3, 5.
		azSet("lc-z1", "lc", 1, 3, false)
		azSet("lc-z2", "lc", 2, 3, false)
		plan := update.Plan{{Name: "lc", Update: config(true, "0-30000")}}
		accept(map[string]int{"lc": 1}, plan)
		Eventually(gst).Should(HaveField("Phase", status.PhaseDeployed))
		// Each pod's drain takes a while: a finalizer, removed 300 ms
		// after its deletion, holds it terminating.
		var pods corev1.PodList
		Expect(cp.Client.List(ctx, &pods, client.InNamespace(ns))).To(Succeed())
		Expect(pods.Items).To(HaveLen(6))
		const hold = "test.bosh-injector.io/drain"
		for i := range pods.Items {
			p := &pods.Items[i]
			patch := client.MergeFrom(p.DeepCopy())
			p.Finalizers = append(p.Finalizers, hold)
			Expect(cp.Client.Patch(ctx, p, patch)).To(Succeed())
		}
		removed := []string{"lc-z2-2", "lc-z1-2", "lc-z2-1"}
		var mu sync.Mutex
		var order []string
		most := 0
		wctx, stop := context.WithCancel(ctx)
		DeferCleanup(stop)
		go func() {
			defer GinkgoRecover()
			since := map[string]time.Time{}
			for wctx.Err() == nil {
				var list corev1.PodList
				if err := cp.Client.List(wctx, &list, client.InNamespace(ns)); err == nil {
					terminating := 0
					for i := range list.Items {
						p := &list.Items[i]
						if p.DeletionTimestamp == nil || !slices.Contains(p.Finalizers, hold) {
							continue
						}
						if slices.Contains(removed, p.Name) {
							terminating++
						}
						if _, ok := since[string(p.UID)]; !ok {
							since[string(p.UID)] = time.Now()
							mu.Lock()
							order = append(order, p.Name)
							mu.Unlock()
						}
						if time.Since(since[string(p.UID)]) > 300*time.Millisecond {
							patch := client.MergeFrom(p.DeepCopy())
							p.Finalizers = slices.DeleteFunc(p.Finalizers, func(f string) bool { return f == hold })
							_ = cp.Client.Patch(wctx, p, patch)
						}
					}
					mu.Lock()
					most = max(most, terminating)
					mu.Unlock()
				}
				time.Sleep(20 * time.Millisecond)
			}
		}()

		if byManifest {
			// The manifest of 3 instances accepted before its objects are
			// applied (or without them): its plan has the instances.
			plan[0].Instances, plan[0].AZs = ptr.To(3), 2
		} else {
			// What the webhook records of `kubectl apply` of objects for
			// 3 instances (replicas 2 and 1), with a new version
			// accepted. kubectl apply sends them one after another.
			for _, name := range []string{"lc-z2", "lc-z1"} {
				to := map[string]string{"lc-z1": "2", "lc-z2": "1"}[name]
				s := get(name)
				patch := client.MergeFrom(s.DeepCopy())
				s.Annotations = map[string]string{names.AnnotationScaleDown: to}
				Expect(cp.Client.Patch(ctx, s, patch)).To(Succeed())
			}
		}
		accept(map[string]int{"lc": 2}, plan)
		Eventually(gst).WithTimeout(30 * time.Second).Should(HaveField("Phase", status.PhaseDeployed))
		st, _ := gst()
		Expect(st).To(And(HaveField("Updated", 3), HaveField("Total", 3)))
		mu.Lock()
		defer mu.Unlock()
		Expect(most).To(Equal(1), "removed instances terminating at once")
		// The removed first, highest index first, then the update's
		// replacements (highest ordinal first per AZ).
		Expect(order).To(Equal([]string{"lc-z2-2", "lc-z1-2", "lc-z2-1", "lc-z1-1", "lc-z1-0", "lc-z2-0"}))
		for _, name := range []string{"lc-z1", "lc-z2"} {
			Expect(get(name).Annotations).NotTo(HaveKey(names.AnnotationScaleDown))
		}
		Expect(*get("lc-z1").Spec.Replicas).To(BeEquivalentTo(2))
		Expect(*get("lc-z2").Spec.Replicas).To(BeEquivalentTo(1))
		// The count left depends on whether the second StatefulSet's
		// annotation came before the first removal.
		Eventually(func() ([]string, error) {
			events, err := eventsWith(rollout.ReasonDeleting)
			var deleting []string
			for _, e := range events {
				deleting = append(deleting, e.Message)
			}
			return deleting, err
		}).Should(ConsistOf(
			HavePrefix("instance group 'lc': deleting unneeded instances lc-z2-2 ("),
			"instance group 'lc': deleting unneeded instances lc-z1-2 (1 more to delete)",
			"instance group 'lc': deleting unneeded instances lc-z2-1 (0 more to delete)"))
	}
	It("scaled down with a new version, deletes the highest indexes max_in_flight at a time, each gone before the next, then updates the rest", func() {
		scaledDown(false)
	})
	It("with a manifest of fewer instances than the replicas, deletes the unneeded instances first the same way, before the StatefulSets are applied", func() {
		scaledDown(true)
	})

	It("refuses a StatefulSet that updates on delete, naming it", func() {
		statefulSet("a", 1)
		// The StatefulSet controller writes its status meanwhile: read and
		// write again on a conflict.
		Expect(kretry.RetryOnConflict(kretry.DefaultRetry, func() error {
			var sts appsv1.StatefulSet
			if err := cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "a"}, &sts); err != nil {
				return err
			}
			sts.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType}
			return cp.Client.Update(ctx, &sts)
		})).To(Succeed())
		plan := update.Plan{{Name: "a", Update: config(true, "0-1000")}}
		accept(map[string]int{"a": 2}, plan)
		Eventually(gst).Should(And(HaveField("Phase", status.PhaseFailed),
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
