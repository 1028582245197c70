package runner_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/bosh-injector/bosh-injector/gather/gathering"
	"github.com/bosh-injector/bosh-injector/gather/gathering/secretdata"
	"github.com/bosh-injector/bosh-injector/gather/gathering/trust"
	"github.com/bosh-injector/bosh-injector/gather/model/bpm"
	"github.com/bosh-injector/bosh-injector/gather/names"
	"github.com/bosh-injector/bosh-injector/gather/operator/manager"
	"github.com/bosh-injector/bosh-injector/gather/operator/runner"
	"github.com/bosh-injector/bosh-injector/gather/operator/status"
	"github.com/bosh-injector/bosh-injector/gather/render/ruby"
	"github.com/bosh-injector/bosh-injector/inject"
	"github.com/bosh-injector/bosh-injector/test/fixtures"
	"github.com/bosh-injector/bosh-injector/webhook"
)

// startOperator runs an operator replica with its runner (the webhook has
// its own suite) until the spec ends, and returns its manager's elected
// channel.
func startOperator(ns string, leaderElection bool) <-chan struct{} {
	GinkgoHelper()
	return startOperatorWith(manager.Options{
		Namespace: ns, OperatorImage: "localhost/bosh-injector:test", ClusterDomain: "cluster.local",
		LeaderElection: leaderElection, Runner: true,
	})
}

func startOperatorWith(o manager.Options) <-chan struct{} {
	GinkgoHelper()
	mgr, err := manager.New(cp.Config, o, GinkgoLogr)
	Expect(err).NotTo(HaveOccurred())
	mctx, cancel := context.WithCancel(ctx)
	DeferCleanup(cancel)
	go func() {
		defer GinkgoRecover()
		_ = mgr.Start(mctx)
	}()
	return mgr.Elected()
}

// jobPlan is the plan the runner gave job's gathering.
func jobPlan(job *batchv1.Job) gathering.Plan {
	GinkgoHelper()
	for _, a := range job.Spec.Template.Spec.Containers[0].Args {
		if p, ok := strings.CutPrefix(a, "--plan="); ok {
			plan, err := gathering.ParsePlan(p)
			Expect(err).NotTo(HaveOccurred())
			return plan
		}
	}
	Fail("Job " + job.Name + " has no --plan")
	return gathering.Plan{}
}

// jobPod is a pod of job as the job controller creates it: its template,
// the Job its controller.
func jobPod(job *batchv1.Job) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: job.Name + "-0", Namespace: job.Namespace,
		Labels:          map[string]string{"batch.kubernetes.io/job-name": job.Name},
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(job, batchv1.SchemeGroupVersion.WithKind("Job"))}},
		Spec: *job.Spec.Template.Spec.DeepCopy()}
}

// terminated stands for pod, created now, its gather container terminated
// with code and message, as the kubelet would write them.
func terminated(pod *corev1.Pod, code int32, message string) {
	GinkgoHelper()
	Expect(cp.Client.Create(ctx, pod)).To(Succeed())
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "gather", State: corev1.ContainerState{
		Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Message: message}}}}
	Expect(cp.Client.Status().Update(ctx, pod)).To(Succeed())
}

// reportFrom stands for pod terminated with the gathering's report.
func reportFrom(pod *corev1.Pod, report trust.Report) {
	GinkgoHelper()
	message, err := report.Encode()
	Expect(err).NotTo(HaveOccurred())
	terminated(pod, 0, message)
}

// jobPodTerminated stands for the Job's pod, its gather container
// terminated with code and message.
func jobPodTerminated(job *batchv1.Job, code int32, message string) {
	GinkgoHelper()
	terminated(jobPod(job), code, message)
}

// reportWritten stands for the Job's pod terminated with the gathering's
// report, as the kubelet would.
func reportWritten(job *batchv1.Job, report trust.Report) {
	GinkgoHelper()
	reportFrom(jobPod(job), report)
}

// complete reports the Job complete, as the job controller would, and its
// pod's report unless it reports no groups.
// shortLivedCertificate is a self-signed certificate (and its key) with an
// hour of its four left: past its expiry warning.
func shortLivedCertificate() (certPEM, keyPEM []byte) {
	GinkgoHelper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	Expect(err).NotTo(HaveOccurred())
	now := time.Now()
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "short"}, NotBefore: now.Add(-3 * time.Hour), NotAfter: now.Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	Expect(err).NotTo(HaveOccurred())
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
}

// expiryWarning waits for the CertificateExpiring Event in namespace ns.
func expiryWarning(ns string) eventsv1.Event {
	GinkgoHelper()
	var warning eventsv1.Event
	Eventually(func() bool {
		var events eventsv1.EventList
		Expect(cp.Client.List(ctx, &events, client.InNamespace(ns))).To(Succeed())
		for _, e := range events.Items {
			if e.Reason == runner.ReasonCertificateExpiring {
				warning = e
				return true
			}
		}
		return false
	}).WithTimeout(20 * time.Second).Should(BeTrue())
	Expect(warning.Type).To(Equal(corev1.EventTypeWarning))
	return warning
}

func complete(job *batchv1.Job, report trust.Report) {
	GinkgoHelper()
	if report.Groups != nil {
		reportWritten(job, report)
	}
	now := metav1.Now()
	job.Status.StartTime, job.Status.CompletionTime, job.Status.Succeeded = &now, &now, 1
	job.Status.Conditions = []batchv1.JobCondition{
		{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now},
	}
	Expect(cp.Client.Status().Update(ctx, job)).To(Succeed())
}

var _ = Describe("the job runner", func() {
	var ns string
	var n int
	var manifest []byte
	BeforeEach(func() {
		n++
		ns = fmt.Sprintf("runner-%d", n)
		Expect(cp.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		var err error
		manifest, err = fixtures.ShopManifest()
		Expect(err).NotTo(HaveOccurred())
	})

	applyManifest := func(data []byte) *corev1.Secret {
		GinkgoHelper()
		s, err := fixtures.ApplyManifest(ctx, cp.Client, ns, data)
		Expect(err).NotTo(HaveOccurred())
		return s
	}
	gatherJobs := func() ([]batchv1.Job, error) {
		var jobs batchv1.JobList
		err := cp.Client.List(ctx, &jobs, client.InNamespace(ns), client.MatchingLabels{names.LabelDeployment: "shop"})
		return jobs.Items, err
	}
	// gatherAs does job's work here, with c's rights and the plan the
	// runner gave the Job, and returns the versions it wrote, as its pod
	// reports them.
	gatherAs := func(c client.Client, job *batchv1.Job) trust.Report {
		GinkgoHelper()
		res, err := gathering.Run(ctx, c, gathering.Config{Namespace: ns, ManifestSecret: "shop-manifest", JobsDir: jobsDir, ClusterDomain: "cluster.local",
			Progress: gathering.Events(ctx, c, GinkgoLogr), Plan: jobPlan(job)},
			gathering.NewRenderBPM(ctx, ruby.Renderer{}), time.Now())
		Expect(err).NotTo(HaveOccurred())
		return res.Report()
	}
	gatherNow := func(job *batchv1.Job) trust.Report {
		GinkgoHelper()
		return gatherAs(cp.Client, job)
	}
	runAndComplete := func(job *batchv1.Job) {
		GinkgoHelper()
		complete(job, gatherNow(job))
	}
	gst := func() (string, error) {
		var s corev1.Secret
		err := cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "shop-manifest"}, &s)
		return s.Annotations[names.AnnotationStatus], err
	}
	stateLabel := func() (string, error) {
		var s corev1.Secret
		err := cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "shop-manifest"}, &s)
		return s.Labels[names.LabelState], err
	}
	eventReasons := func() ([]string, error) {
		var events eventsv1.EventList
		err := cp.Client.List(ctx, &events, client.InNamespace(ns))
		var reasons []string
		for _, e := range events.Items {
			reasons = append(reasons, e.Reason)
		}
		return reasons, err
	}
	newestJob := func(exclude string) *batchv1.Job {
		GinkgoHelper()
		var found *batchv1.Job
		Eventually(func() bool {
			jobs, _ := gatherJobs()
			for i := range jobs {
				if jobs[i].Name != exclude {
					found = &jobs[i]
					return true
				}
			}
			return false
		}).WithTimeout(20 * time.Second).Should(BeTrue())
		return found
	}

	It("gathers, rolls only the changed group, and cleans up with the manifest", func() {
		startOperator(ns, false)
		for _, ig := range []string{"web", "db"} {
			labels := map[string]string{names.LabelDeployment: "shop", names.LabelInstanceGroup: ig}
			Expect(cp.Client.Create(ctx, &appsv1.StatefulSet{
				ObjectMeta: metav1.ObjectMeta{Name: ig, Namespace: ns},
				Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](0), Selector: &metav1.LabelSelector{MatchLabels: labels},
					Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
						Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}},
			})).To(Succeed())
		}
		manifestSecret := applyManifest(manifest)

		first := newestJob("")
		Expect(first.Name).To(HavePrefix("shop-gather-"))
		var inits []string
		for _, c := range first.Spec.Template.Spec.InitContainers {
			inits = append(inits, c.Name+"="+c.Image)
		}
		Expect(inits).To(Equal([]string{
			"copy-bus=localhost/bosh-injector-fixtures/bus:ubuntu-noble-1.0-1.0.0",
			"copy-store=localhost/bosh-injector-fixtures/store:ubuntu-noble-1.0-1.0.0",
			"copy-shop=localhost/bosh-injector-fixtures/shop:ubuntu-noble-1.0-1.0.0",
		}))
		gather := first.Spec.Template.Spec.Containers[0]
		Expect(gather.Image).To(Equal("localhost/bosh-injector:test"))
		Expect(gather.Args).To(ContainElements("gather", "--manifest-secret=shop-manifest", "--namespace="+ns))
		Expect(first.Spec.Template.Spec.ServiceAccountName).To(Equal("shop-gather"))
		var role corev1.ServiceAccount
		Expect(cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "shop-gather"}, &role)).To(Succeed())
		Eventually(gst).Should(ContainSubstring(`"state":"GatherStarted"`))
		Eventually(stateLabel).Should(Equal("Gathering"))

		runAndComplete(first)
		Eventually(gst).Should(ContainSubstring(`"state":"Gathered"`))
		Eventually(stateLabel).Should(Equal("Gathered"))
		var st status.Gathering
		s, err := gst()
		Expect(err).NotTo(HaveOccurred())
		Expect(json.Unmarshal([]byte(s), &st)).To(Succeed())
		Expect(st.Versions).To(Equal(map[string]int{"bus": 1, "db": 1, "web": 1, "smoke-tests": 1}))
		lastChange, err := time.Parse(time.RFC3339, st.LastChange)
		Expect(err).NotTo(HaveOccurred())
		Expect(lastChange).To(BeTemporally("~", time.Now(), time.Minute))
		// The gathering reported its stages, one Event per group rendered.
		Eventually(eventReasons).Should(ContainElements(gathering.StageVariables, gathering.StageLinks))
		reasons, _ := eventReasons()
		Expect(slices.DeleteFunc(reasons, func(r string) bool { return r != gathering.StageRendered })).To(HaveLen(4))

		// A property of web changes: a new Job; after it, only web rolls.
		applyManifest([]byte(strings.Replace(string(manifest), "        session_secret: ((session_secret))", "        session_secret: ((session_secret))\n        workers: 7", 1)))
		second := newestJob(first.Name)
		// A bpm Secret forged while the gathering finishes, naming its
		// resolved version, is not what it reports: not accepted.
		written := gatherNow(second)
		forged := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shop.bpm.web-v999", Labels: map[string]string{
			names.LabelDeployment: "shop", names.LabelInstanceGroup: "web", names.LabelSecretKind: names.KindBPM, names.LabelVersion: "999"}},
			Data: map[string][]byte{bpm.InfoKey: []byte(`{"resolved_secret":"shop.ig-resolved.web-v2"}`)}}
		Expect(cp.Client.Create(ctx, forged)).To(Succeed())
		complete(second, written)
		Eventually(func() (map[string]string, error) {
			var sts appsv1.StatefulSet
			err := cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, &sts)
			return sts.Spec.Template.Annotations, err
		}).Should(HaveKeyWithValue(names.AnnotationResolvedVersion, "2"))
		// The runner recorded what each gathering reported, in the
		// operator's namespace (here the test's own).
		rec, err := trust.Read(ctx, cp.Client, ns, ns, "shop")
		Expect(err).NotTo(HaveOccurred())
		Expect(rec.Groups["web"].Versions).To(HaveLen(2))
		Expect(rec.Groups["web"].Latest().Resolved.Name).To(Equal("shop.ig-resolved.web-v2"))
		Expect(rec.Groups["db"].Versions).To(ConsistOf(HaveField("Resolved.Version", 1)))
		Expect(rec.Groups["web"].Latest().BPM.Name).To(Equal("shop.bpm.web-v2"))
		// Seen again, the gathering adds nothing.
		again, refused, err := trust.Accept(ctx, cp.Client, ns, ns, "shop", second.UID, written.Groups)
		Expect(err).NotTo(HaveOccurred())
		Expect(refused).To(BeEmpty())
		Expect(again).To(Equal(rec))
		Expect(cp.Client.Delete(ctx, forged)).To(Succeed())

		var db appsv1.StatefulSet
		Expect(cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "db"}, &db)).To(Succeed())
		Expect(db.Spec.Template.Annotations).NotTo(HaveKey(names.AnnotationResolvedVersion))
		// The older Job is removed once the newer one succeeded.
		Eventually(gatherJobs).Should(ConsistOf(HaveField("Name", second.Name)))

		// Deleting the manifest Secret removes the deployment's objects,
		// never the user's workloads, nor the generated credentials.
		var vars corev1.SecretList
		Expect(cp.Client.List(ctx, &vars, client.InNamespace(ns), runner.CredentialsSelector("shop"))).To(Succeed())
		Expect(vars.Items).NotTo(BeEmpty())
		Expect(cp.Client.Delete(ctx, manifestSecret)).To(Succeed())
		Eventually(func() ([]string, error) {
			var secrets corev1.SecretList
			err := cp.Client.List(ctx, &secrets, client.InNamespace(ns), client.HasLabels{names.LabelDeployment})
			var kinds []string
			for _, s := range secrets.Items {
				kinds = append(kinds, s.Labels[names.LabelSecretKind])
			}
			return kinds, err
		}).WithTimeout(30 * time.Second).Should(And(HaveLen(len(vars.Items)), HaveEach(names.KindVariable)))
		Eventually(func() (int, error) {
			var svcs corev1.ServiceList
			err := cp.Client.List(ctx, &svcs, client.InNamespace(ns))
			return len(svcs.Items), err
		}).WithTimeout(30 * time.Second).Should(BeZero())
		Eventually(gatherJobs).WithTimeout(30 * time.Second).Should(BeEmpty())
		Expect(cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, &db)).To(Succeed())
		// Its record goes too: applied again, it starts clean.
		Eventually(func() (*trust.Record, error) { return trust.Read(ctx, cp.Client, ns, ns, "shop") }).
			WithTimeout(30 * time.Second).Should(BeNil())
	})

	It("accepts no version of a gathering whose pod reported none, with a warning Event", func() {
		startOperator(ns, false)
		applyManifest(manifest)
		job := newestJob("")
		gatherNow(job)
		complete(job, trust.Report{})
		Eventually(eventReasons).Should(ContainElement(status.ReasonNotAccepted))
		Eventually(func() (*trust.Record, error) {
			return trust.Read(ctx, cp.Client, ns, ns, "shop")
		}).Should(And(Not(BeNil()), HaveField("Groups", BeEmpty())))
	})

	It("never builds on, accepts or injects a forged bpm Secret present while the deployment gathers again", func() {
		// The webhook never injects the operator's own namespace.
		operatorNS := ns + "-operator"
		Expect(cp.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: operatorNS}})).To(Succeed())
		startOperator(operatorNS, false)
		record := func() (*trust.Record, error) { return trust.Read(ctx, cp.Client, operatorNS, ns, "shop") }
		applyManifest(manifest)
		first := newestJob("")
		runAndComplete(first)
		Eventually(stateLabel).Should(Equal("Gathered"))
		Eventually(record).Should(HaveField("Groups", HaveLen(4)))

		// v999 is the real latest db BPM info, rendered from the same
		// inputs (so its digest would have it reused), but privileged and
		// running an executable of the forger's choice.
		var real corev1.Secret
		Expect(cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "shop.bpm.db-v1"}, &real)).To(Succeed())
		var info bpm.Info
		Expect(secretdata.Decode(real.Data[bpm.InfoKey], &info)).To(Succeed())
		const evil = "/bin/forged-executable"
		for _, ib := range info.BPM {
			for name, cfg := range ib.Jobs {
				for i := range cfg.Processes {
					cfg.Processes[i].Executable = evil
					cfg.Processes[i].Unsafe = &bpm.Unsafe{Privileged: true}
				}
				ib.Jobs[name] = cfg
			}
		}
		data, err := secretdata.Encode(info)
		Expect(err).NotTo(HaveOccurred())
		forged := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shop.bpm.db-v999", Labels: real.Labels,
			Annotations: real.Annotations}, Immutable: ptr.To(true), Data: map[string][]byte{bpm.InfoKey: data}}
		forged.Labels[names.LabelVersion] = "999"
		Expect(cp.Client.Create(ctx, forged)).To(Succeed())

		// A generated variable db does not use deleted: the deployment
		// gathers again, db's templates and specs unchanged.
		Expect(cp.Client.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shop.var-bus-password"}})).To(Succeed())
		second := newestJob(first.Name)
		// Gathered once the runner's own status says this Job runs.
		Eventually(gst).Should(ContainSubstring(second.Name))
		plan := jobPlan(second)
		Expect(plan.Recorded).To(HaveKeyWithValue("db", HaveField("BPM.Name", "shop.bpm.db-v1")))
		Expect(plan.Above).To(HaveKeyWithValue(gathering.Series(names.KindBPM, "db"), 999), "new versions go above the forged number")
		Expect(plan.Names()).NotTo(ContainElement(forged.Name))
		written := gatherNow(second)
		complete(second, written)
		Eventually(record).Should(HaveField("Job", second.UID))

		// Neither reused, copied nor accepted: db stays on the real v1.
		Expect(written.Groups).To(HaveKeyWithValue("db", HaveField("BPM", 1)))
		rec, err := record()
		Expect(err).NotTo(HaveOccurred())
		Expect(rec.Groups["db"].Versions).To(ConsistOf(HaveField("BPM.Name", "shop.bpm.db-v1")))
		Expect(rec.Groups["bus"].Latest().BPM.Version).To(Equal(2), "bus changed")
		var latest corev1.Secret
		Expect(cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: rec.Groups["db"].Latest().BPM.Name}, &latest)).To(Succeed())
		Expect(string(latest.Data[bpm.InfoKey])).NotTo(Or(ContainSubstring(evil), ContainSubstring("privileged")))
		var all corev1.SecretList
		Expect(cp.Client.List(ctx, &all, client.InNamespace(ns), client.MatchingLabels{names.LabelSecretKind: names.KindBPM})).To(Succeed())
		for _, s := range all.Items {
			if s.Name != forged.Name {
				Expect(string(s.Data[bpm.InfoKey])).NotTo(ContainSubstring(evil), "%s copies the forged processes", s.Name)
			}
		}

		// A pod of db admitted through the webhook gets the real
		// processes.
		raw, err := json.Marshal(corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "db-0", Namespace: ns, Labels: map[string]string{
			names.LabelDeployment: "shop", names.LabelInstanceGroup: "db", "apps.kubernetes.io/pod-index": "0"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "placeholder", Image: "busybox"}},
				Volumes: []corev1.Volume{{Name: "store", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "store-db-0"}}}}}})
		Expect(err).NotTo(HaveOccurred())
		h := &webhook.Handler{Cache: cp.Client, Settings: inject.Settings{OperatorImage: "localhost/bosh-injector:test", DNS: inject.DNS{Server: "10.96.0.53", ClusterDomain: "cluster.local"}},
			OperatorNamespace: operatorNS, Log: GinkgoLogr}
		resp := h.Handle(ctx, admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Namespace: ns, Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: raw}}})
		Expect(resp.Allowed).To(BeTrue(), resp.Result.String())
		pod, patched, err := fixtures.Patched(raw, resp.Patch)
		Expect(err).NotTo(HaveOccurred())
		Expect(string(patched)).NotTo(Or(ContainSubstring(evil), ContainSubstring(forged.Name)))
		Expect(pod.Spec.Containers).To(ContainElement(HaveField("Name", HavePrefix("pgstore"))))
		for _, c := range append(pod.Spec.InitContainers, pod.Spec.Containers...) {
			Expect(c.SecurityContext == nil || c.SecurityContext.Privileged == nil || !*c.SecurityContext.Privileged).To(BeTrue(), c.Name)
		}
	})

	It("accepts no Secret deleted and created again between the gathering's write and the runner's accept", func() {
		startOperator(ns, false)
		applyManifest(manifest)
		job := newestJob("")
		written := gatherNow(job)
		// The same name and labels, other content, another object.
		var b corev1.Secret
		Expect(cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "shop.bpm.web-v1"}, &b)).To(Succeed())
		Expect(cp.Client.Delete(ctx, &b)).To(Succeed())
		recreated := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: b.Name, Labels: b.Labels, Annotations: b.Annotations},
			Immutable: ptr.To(true), Data: map[string][]byte{bpm.InfoKey: []byte(strings.Replace(string(b.Data[bpm.InfoKey]), "storefront", "storefrong", 1))}}
		Expect(cp.Client.Create(ctx, recreated)).To(Succeed())
		complete(job, written)
		Eventually(eventReasons).Should(ContainElement(status.ReasonNotAccepted))
		rec, err := trust.Read(ctx, cp.Client, ns, ns, "shop")
		Expect(err).NotTo(HaveOccurred())
		Expect(rec.Groups).To(HaveLen(3))
		Expect(rec.Groups).NotTo(HaveKey("web"))
		var events eventsv1.EventList
		Expect(cp.Client.List(ctx, &events, client.InNamespace(ns))).To(Succeed())
		Expect(events.Items).To(ContainElement(And(HaveField("Reason", status.ReasonNotAccepted), HaveField("Type", corev1.EventTypeWarning),
			HaveField("Note", ContainSubstring("instance group 'web': Secrets shop.bpm.web-v1 and shop.ig-resolved.web-v1 do not hold what the gathering wrote")))))
	})

	It("ignores a report from a pod the Job's template did not make, and replaces a Job it did not create", func() {
		startOperator(ns, false)
		// The Job's name follows from the inputs: the same manifest in
		// another namespace tells it in advance.
		scratch := ns + "-scratch"
		Expect(cp.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: scratch}})).To(Succeed())
		_, err := fixtures.ApplyManifest(ctx, cp.Client, scratch, manifest)
		Expect(err).NotTo(HaveOccurred())
		var name string
		Eventually(func() ([]batchv1.Job, error) {
			var jobs batchv1.JobList
			err := cp.Client.List(ctx, &jobs, client.InNamespace(scratch))
			if len(jobs.Items) > 0 {
				name = jobs.Items[0].Name
			}
			return jobs.Items, err
		}).WithTimeout(20 * time.Second).ShouldNot(BeEmpty())

		// A Job of that name created beforehand, complete, with a pod
		// reporting the forger's versions.
		preset := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{names.LabelDeployment: "shop"}},
			Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{Name: "gather", Image: "busybox"}}}}}}
		Expect(cp.Client.Create(ctx, preset)).To(Succeed())
		applyManifest(manifest)
		Eventually(eventReasons).WithTimeout(20 * time.Second).Should(ContainElement(status.ReasonForeignJob))
		var job *batchv1.Job
		Eventually(func() bool {
			jobs, _ := gatherJobs()
			for i := range jobs {
				if jobs[i].UID != preset.UID && jobs[i].Name == name {
					job = &jobs[i]
				}
			}
			return job != nil
		}).WithTimeout(20*time.Second).Should(BeTrue(), "the runner created its own Job")
		Expect(job.Spec.Template.Spec.Containers[0].Image).To(Equal("localhost/bosh-injector:test"))

		// A pod naming the runner's Job as its controller, but running
		// another program, reports: ignored.
		written := gatherNow(job)
		impostor := jobPod(job)
		impostor.Spec.Containers[0].Image = "localhost/forger:latest"
		reportFrom(impostor, written)
		complete(job, trust.Report{})
		Eventually(eventReasons).Should(ContainElement(status.ReasonNotAccepted))
		Consistently(func() (*trust.Record, error) { return trust.Read(ctx, cp.Client, ns, ns, "shop") }, 2*time.Second).Should(
			HaveField("Groups", BeEmpty()))
	})

	It("deletes the generated credentials with the manifest when its label asks, never a user-provided one", func() {
		startOperator(ns, false)
		Expect(cp.Client.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "shop.var-session-secret", Namespace: ns},
			Data:       map[string][]byte{"password": []byte("given")},
		})).To(Succeed())
		manifestSecret := applyManifest(manifest)
		runAndComplete(newestJob(""))
		Eventually(stateLabel).Should(Equal("Gathered"))
		patch := client.MergeFrom(manifestSecret.DeepCopy())
		manifestSecret.Labels[names.LabelDeleteCredentials] = "true"
		Expect(cp.Client.Patch(ctx, manifestSecret, patch)).To(Succeed())
		Eventually(func() ([]string, error) {
			err := cp.Client.Get(ctx, client.ObjectKeyFromObject(manifestSecret), manifestSecret)
			return manifestSecret.Finalizers, err
		}).Should(ContainElement(names.LabelDeleteCredentials))

		Expect(cp.Client.Delete(ctx, manifestSecret)).To(Succeed())
		Eventually(func() error {
			return cp.Client.Get(ctx, client.ObjectKeyFromObject(manifestSecret), &corev1.Secret{})
		}).WithTimeout(20 * time.Second).Should(Satisfy(apierrors.IsNotFound))
		var vars corev1.SecretList
		Expect(cp.Client.List(ctx, &vars, client.InNamespace(ns), runner.CredentialsSelector("shop"))).To(Succeed())
		Expect(vars.Items).To(BeEmpty())
		Expect(cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "shop.var-session-secret"}, &corev1.Secret{})).To(Succeed())
		Eventually(eventReasons).Should(ContainElement(runner.ReasonCredentialsDeleted))
	})

	It("rotates: a deleted generated variable or a changed user-provided one gathers again and rolls only the groups that changed", func() {
		startOperator(ns, false)
		Expect(cp.Client.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "shop.var-db-password", Namespace: ns, Labels: map[string]string{names.LabelDeployment: "shop"}},
			Data:       map[string][]byte{"password": []byte("given-password-1")},
		})).To(Succeed())
		// An unlabelled user-provided value is read too, never taken for a
		// deleted variable to regenerate.
		Expect(cp.Client.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "shop.var-session-secret", Namespace: ns},
			Data:       map[string][]byte{"password": []byte("unlabelled-session-secret")},
		})).To(Succeed())
		applyManifest(manifest)
		first := newestJob("")
		runAndComplete(first)
		versions := func() (map[string]int, error) {
			s, err := gst()
			var st status.Gathering
			_ = json.Unmarshal([]byte(s), &st)
			return st.Versions, err
		}
		Eventually(versions).Should(Equal(map[string]int{"bus": 1, "db": 1, "web": 1, "smoke-tests": 1}))
		password := func() []byte {
			GinkgoHelper()
			var s corev1.Secret
			Expect(cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "shop.var-bus-password"}, &s)).To(Succeed())
			return s.Data["password"]
		}
		before := password()

		// A generated credential deleted: regenerated by a new gathering.
		Expect(cp.Client.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shop.var-bus-password"}})).To(Succeed())
		second := newestJob(first.Name)
		Eventually(eventReasons).Should(ContainElement(status.ReasonRegenerating))
		runAndComplete(second)
		Expect(password()).NotTo(Equal(before))
		Eventually(versions).Should(HaveKeyWithValue("bus", 2))
		v, _ := versions()
		Expect(v).To(HaveKeyWithValue("db", 1))
		// Nothing else starts once the variable exists again.
		Eventually(gatherJobs).Should(HaveLen(1))
		Consistently(func() ([]batchv1.Job, error) { return gatherJobs() }, 2*time.Second).Should(ConsistOf(HaveField("Name", second.Name)))

		// A user-provided credential changed: db gathers and rolls, bus not.
		var given corev1.Secret
		Expect(cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "shop.var-db-password"}, &given)).To(Succeed())
		given.Data["password"] = []byte("given-password-2")
		Expect(cp.Client.Update(ctx, &given)).To(Succeed())
		third := newestJob(second.Name)
		Expect(third.Name).NotTo(Equal(first.Name))
		runAndComplete(third)
		Eventually(versions).Should(HaveKeyWithValue("db", 2))
		v, _ = versions()
		Expect(v).To(HaveKeyWithValue("bus", 2))
	})

	It("warns of a generated certificate with a third of its lifetime left, naming the variable, never its value", func() {
		startOperator(ns, false)
		applyManifest(manifest)
		runAndComplete(newestJob(""))
		Eventually(stateLabel).Should(Equal("Gathered"))

		certPEM, _ := shortLivedCertificate()
		Expect(cp.Client.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "shop.var-short-lived", Namespace: ns, Labels: runner.CredentialsSelector("shop"),
				Annotations: map[string]string{names.AnnotationVariable: "short_lived"}},
			Data: map[string][]byte{"certificate": certPEM, "private_key": []byte("not-to-be-seen")},
		})).To(Succeed())
		warning := expiryWarning(ns)
		Expect(warning.Note).To(ContainSubstring("certificate variable 'short_lived' expires"))
		Expect(warning.Note).NotTo(Or(ContainSubstring("BEGIN"), ContainSubstring("not-to-be-seen")))
		Expect(warning.Note).NotTo(ContainSubstring("bus_ca"))

		families, err := metrics.Registry.Gather()
		Expect(err).NotTo(HaveOccurred())
		var seconds []float64
		for _, f := range families {
			if f.GetName() != "bosh_injector_certificate_expiry_seconds" {
				continue
			}
			for _, m := range f.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "namespace" && l.GetValue() == ns {
						seconds = append(seconds, m.GetGauge().GetValue())
					}
				}
			}
		}
		// bus_ca, bus_tls (a year) and short_lived (an hour).
		Expect(seconds).To(ContainElement(BeNumerically("~", 3600, 120)))
		Expect(seconds).To(ContainElement(BeNumerically(">", 300*24*3600)))
	})

	It("gathers with the Job's own Role, which names the Secrets it reads, and mounts its token in the gather container only", func() {
		startOperator(ns, false)
		Expect(cp.Client.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "unrelated", Namespace: ns},
			Data:       map[string][]byte{"token": []byte("not-for-gathering")},
		})).To(Succeed())
		applyManifest(manifest)
		job := newestJob("")
		spec := job.Spec.Template.Spec
		Expect(spec.AutomountServiceAccountToken).To(HaveValue(BeFalse()))
		for _, c := range spec.InitContainers {
			Expect(c.VolumeMounts).NotTo(ContainElement(HaveField("MountPath", "/var/run/secrets/kubernetes.io/serviceaccount")), c.Name)
		}
		Expect(spec.Containers[0].VolumeMounts).To(ContainElement(HaveField("MountPath", "/var/run/secrets/kubernetes.io/serviceaccount")))
		// Bad input fails the Job at once: retrying cannot help.
		Expect(job.Spec.PodFailurePolicy.Rules).To(ConsistOf(And(HaveField("Action", batchv1.PodFailurePolicyActionFailJob),
			HaveField("OnExitCodes.Values", Equal([]int32{status.ExitInvalidInput})))))

		var role rbacv1.Role
		Expect(cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "shop-gather"}, &role)).To(Succeed())
		Expect(role.Rules[0].ResourceNames).To(Equal([]string{"shop-manifest"}))
		Expect(role.Rules[1].ResourceNames).To(ContainElements("shop.var-bus-password", "shop.var-bus-ca", "shop.var-session-secret"))
		for _, rule := range role.Rules {
			Expect(rule.Verbs).NotTo(ContainElements("watch", "*"))
			// Secrets: never listed or deleted, read by name only.
			if slices.Contains(rule.Resources, "secrets") {
				Expect(rule.Verbs).NotTo(ContainElements("list", "delete"))
				if !slices.Equal(rule.Verbs, []string{"create"}) {
					Expect(rule.ResourceNames).NotTo(BeEmpty(), "%v", rule)
				}
			}
		}

		// The gathering as the Job's ServiceAccount: enough to gather, not
		// to read, list or delete another Secret.
		cfg := rest.CopyConfig(cp.Config)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":shop-gather",
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}}
		sa, err := client.New(cfg, client.Options{})
		Expect(err).NotTo(HaveOccurred())
		complete(job, gatherAs(sa, job))
		Eventually(stateLabel).Should(Equal("Gathered"))
		Eventually(func() (*trust.Record, error) { return trust.Read(ctx, cp.Client, ns, ns, "shop") }).Should(
			HaveField("Groups", HaveLen(4)))
		err = sa.Get(ctx, client.ObjectKey{Namespace: ns, Name: "unrelated"}, &corev1.Secret{})
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
		err = sa.List(ctx, &corev1.SecretList{}, client.InNamespace(ns))
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
		err = sa.List(ctx, &corev1.SecretList{}, client.InNamespace(ns), client.MatchingLabels{names.LabelDeployment: "shop"})
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
		err = sa.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "unrelated"}})
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
		err = sa.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shop.bpm.web-v1"}})
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)

		// A new variable in the manifest: the Role names it, and the
		// versions accepted last, which the next gathering builds on.
		applyManifest([]byte(strings.Replace(string(manifest), "variables:\n", "variables:\n- {name: extra_password, type: password}\n", 1)))
		Eventually(func() ([]string, error) {
			err := cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "shop-gather"}, &role)
			return role.Rules[1].ResourceNames, err
		}).WithTimeout(20 * time.Second).Should(ContainElement("shop.var-extra-password"))
		Expect(role.Rules[2].ResourceNames).To(ContainElements("shop.bpm.web-v1", "shop.ig-resolved.web-v1"))
		second := newestJob(job.Name)
		written := gatherAs(sa, second)
		Expect(written.Groups["web"].BPM).To(Equal(1), "the accepted version, read by name, is built on")
	})

	It("with watch namespaces, works in those only", func() {
		other := ns + "-unwatched"
		Expect(cp.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: other}})).To(Succeed())
		startOperatorWith(manager.Options{Namespace: ns, OperatorImage: "localhost/bosh-injector:test", ClusterDomain: "cluster.local",
			Runner: true, WatchNamespaces: []string{ns}})
		_, err := fixtures.ApplyManifest(ctx, cp.Client, other, manifest)
		Expect(err).NotTo(HaveOccurred())
		applyManifest(manifest)
		newestJob("")
		Consistently(func() ([]batchv1.Job, error) {
			var jobs batchv1.JobList
			err := cp.Client.List(ctx, &jobs, client.InNamespace(other))
			return jobs.Items, err
		}, 2*time.Second).Should(BeEmpty())
	})

	It("reports an invalid manifest as an event and a status, keeping what was gathered", func() {
		startOperator(ns, false)
		applyManifest([]byte("name: shop\nreleases: [{name: bus}]\ninstance_groups: []\n"))
		Eventually(gst).Should(ContainSubstring(`"state":"InvalidManifest"`))
		Eventually(stateLabel).Should(Equal("Invalid"))
		Eventually(func() ([]string, error) {
			var events corev1.EventList
			err := cp.Client.List(ctx, &events, client.InNamespace(ns))
			var reasons []string
			for _, e := range events.Items {
				reasons = append(reasons, e.Reason)
			}
			return reasons, err
		}).Should(ContainElement("InvalidManifest"))
		jobs, _ := gatherJobs()
		Expect(jobs).To(BeEmpty())
	})

	It("serves gathering metrics on the operator's metrics endpoint", func() {
		port := freePort()
		startOperatorWith(manager.Options{Namespace: ns, OperatorImage: "localhost/bosh-injector:test", ClusterDomain: "cluster.local",
			Runner: true, MetricsPort: port})
		applyManifest(manifest)
		job := newestJob("")
		runAndComplete(job)
		Eventually(stateLabel).Should(Equal("Gathered"))

		scrape := func() (string, error) {
			resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(port) + "/metrics")
			if err != nil {
				return "", err
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			return string(b), err
		}
		Eventually(scrape).Should(And(
			MatchRegexp(`bosh_injector_gatherings_total\{result="Gathered"\} [1-9]`),
			MatchRegexp(`bosh_injector_gathering_duration_seconds_count [1-9]`),
			ContainSubstring(`bosh_injector_last_successful_gathering_timestamp_seconds{deployment="shop",namespace="`+ns+`"}`),
			MatchRegexp(`bosh_injector_deployments\{state="Gathered"\} [1-9]`),
		))
	})

	It("runs the runner on the elected replica only", func() {
		operatorNS := ns + "-operator"
		Expect(cp.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: operatorNS}})).To(Succeed())
		first := startOperator(operatorNS, true)
		Eventually(first).WithTimeout(30 * time.Second).Should(BeClosed())
		second := startOperator(operatorNS, true)
		applyManifest(manifest)
		newestJob("")
		Consistently(second, 2*time.Second).ShouldNot(BeClosed())
		var lease coordinationv1.Lease
		Expect(cp.Client.Get(ctx, client.ObjectKey{Namespace: operatorNS, Name: "bosh-injector-runner"}, &lease)).To(Succeed())
		Expect(*lease.Spec.HolderIdentity).NotTo(BeEmpty())
		jobs, _ := gatherJobs()
		Expect(jobs).To(HaveLen(1))
	})

	It("gathers a consumer again when a link it consumes from another deployment changes, and when it goes", func() {
		startOperator(ns, false)
		report := strings.NewReplacer("\nname: shop\n", "\nname: report\n",
			"        session_secret: ((session_secret))\n", "        session_secret: ((session_secret))\n    consumes: {database: {from: database, deployment: shop}}\n").Replace(string(manifest))
		Expect(cp.Client.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "report-manifest", Namespace: ns, Labels: map[string]string{names.LabelDeployment: "report"}},
			Data:       map[string][]byte{names.ManifestKey: []byte(report)},
		})).To(Succeed())
		reportJobs := func() []string {
			var jobs batchv1.JobList
			Expect(cp.Client.List(ctx, &jobs, client.InNamespace(ns), client.MatchingLabels{names.LabelDeployment: "report"})).To(Succeed())
			var out []string
			for _, j := range jobs.Items {
				out = append(out, j.Name)
			}
			return out
		}
		Eventually(reportJobs).WithTimeout(20 * time.Second).Should(HaveLen(1))
		first := reportJobs()[0]

		// A link Secret with the shop's labels that no accepted gathering
		// of the shop reported starts nothing.
		link := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "shop.link.database-v1", Namespace: ns, Labels: map[string]string{
				names.LabelDeployment: "shop", names.LabelSecretKind: names.KindLink, names.LabelInstanceGroup: "database", names.LabelVersion: "1"}},
			Immutable: new(true),
			Data:      map[string][]byte{names.LinkKey: []byte(`{"name":"database","type":"pgsql"}`)},
		}
		Expect(cp.Client.Create(ctx, link)).To(Succeed())
		Consistently(reportJobs, 3*time.Second).Should(HaveLen(1))

		// The shop's accepted gathering reports the link: the report
		// gathers again.
		_, refused, err := runner.AcceptReport(ctx, cp.Client, ns, ns, "shop", "shop-gathering-1", "",
			trust.Report{Groups: trust.Written{}, Links: map[string]trust.WrittenLink{"database": trust.WrittenLinkOf(link)}})
		Expect(err).NotTo(HaveOccurred())
		Expect(refused).To(BeEmpty())
		Eventually(reportJobs).WithTimeout(20 * time.Second).Should(HaveLen(2))

		// The shop no longer sharing it, the runner deletes the link once it
		// accepted the shop's gathering: the report's inputs are those of
		// its first gathering again, whose Job the runner removed once the
		// second succeeded, so it gathers them again (and fails with the
		// director's "No link providers found").
		Expect(cp.Client.Delete(ctx, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: first, Namespace: ns}},
			client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
		Eventually(reportJobs).WithTimeout(20 * time.Second).Should(HaveLen(1))
		second := reportJobs()[0]
		_, _, err = runner.AcceptReport(ctx, cp.Client, ns, ns, "shop", "shop-gathering-2", "", trust.Report{Groups: trust.Written{}})
		Expect(err).NotTo(HaveOccurred())
		Expect(apierrors.IsNotFound(cp.Client.Get(ctx, client.ObjectKeyFromObject(link), &corev1.Secret{}))).To(BeTrue(), "the link no longer shared is deleted")
		Eventually(reportJobs).WithTimeout(20 * time.Second).Should(ConsistOf(first, second))
	})

	It("gathers a deployment again when a deployment its DNS aliases target changes", func() {
		startOperator(ns, false)
		report := strings.Replace(string(manifest), "\nname: shop\n", "\nname: report\n", 1) + `
addons:
- name: aliases
  jobs:
  - name: bosh-dns-aliases
    release: shop
    properties:
      aliases:
      - domain: _.bus.service.internal
        targets: [{query: _, instance_group: bus, deployment: shop}]
`
		Expect(cp.Client.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "report-manifest", Namespace: ns, Labels: map[string]string{names.LabelDeployment: "report"}},
			Data:       map[string][]byte{names.ManifestKey: []byte(report)},
		})).To(Succeed())
		reportJobs := func() []batchv1.Job {
			var jobs batchv1.JobList
			Expect(cp.Client.List(ctx, &jobs, client.InNamespace(ns), client.MatchingLabels{names.LabelDeployment: "report"})).To(Succeed())
			return jobs.Items
		}
		Eventually(reportJobs).WithTimeout(20 * time.Second).Should(HaveLen(1))

		// The shop's accepted gatherings write new versions of the bus
		// group's BPM info (its instances): the report's `_` names change
		// with them.
		for v := range 2 {
			info := bpm.Info{Deployment: "shop", InstanceGroup: "bus", Instances: v + 3, ResolvedSecret: fmt.Sprintf("shop.ig-resolved.bus-v%d", v+1)}
			Expect(fixtures.StoreInfo(ctx, cp.Client, ns, ns, info)).To(Succeed())
			Eventually(reportJobs).WithTimeout(20 * time.Second).Should(HaveLen(v + 2))
		}
	})
})
