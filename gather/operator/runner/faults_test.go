package runner_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admission/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/bosh-injector/bosh-injector/gather/gathering"
	"github.com/bosh-injector/bosh-injector/gather/gathering/trust"
	"github.com/bosh-injector/bosh-injector/gather/model/deployment"
	"github.com/bosh-injector/bosh-injector/gather/names"
	"github.com/bosh-injector/bosh-injector/gather/operator/runner"
	"github.com/bosh-injector/bosh-injector/gather/operator/status"
	"github.com/bosh-injector/bosh-injector/gather/render/ruby"
	"github.com/bosh-injector/bosh-injector/inject"
	"github.com/bosh-injector/bosh-injector/test/fixtures"
	"github.com/bosh-injector/bosh-injector/webhook"
)

// lockedBuffer collects every log line of a run, the operator's and the
// gathering's, for the checks that no generated value is ever logged and
// that nothing panicked.
type lockedBuffer struct{ fixtures.SyncBuffer }

func (b *lockedBuffer) log() logr.Logger {
	return funcr.New(func(prefix, args string) { fmt.Fprintln(b, prefix, args) }, funcr.Options{Verbosity: 10})
}

// operatorProcess is the operator as its pod runs it, `bosh-injector
// webhook` (here the job runner alone), in a child process: this test
// binary, which TestMain turns into the command.
type operatorProcess struct {
	cmd         *exec.Cmd
	exited      chan struct{}
	metricsPort int
}

func startOperatorProcess(namespace, kubeconfig string, logs io.Writer) *operatorProcess {
	GinkgoHelper()
	p := &operatorProcess{exited: make(chan struct{}), metricsPort: freePort()}
	p.cmd = exec.Command(os.Args[0], "webhook", "--log-level=debug", "--kubeconfig="+kubeconfig, "--namespace="+namespace,
		"--operator-image=localhost/bosh-injector:test", "--cluster-domain=cluster.local",
		"--webhook=false", "--leader-elect=false", "--metrics-port="+strconv.Itoa(p.metricsPort), "--health-port=0")
	p.cmd.Env = append(os.Environ(), runOperatorEnv+"=1")
	p.cmd.Stdout, p.cmd.Stderr = logs, logs
	// It dies with the test process, however that ends.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	Expect(p.cmd.Start()).To(Succeed())
	go func() {
		_ = p.cmd.Wait()
		close(p.exited)
	}()
	return p
}

// kill ends the operator as a node failure or the OOM killer would: no
// graceful shutdown, a reconcile cut wherever it was.
func (p *operatorProcess) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
}

// panics is how many panics controller-runtime recovered from in the
// operator's reconciles, by its own count on the metrics endpoint.
func (p *operatorProcess) panics() (int, error) {
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", p.metricsPort))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	m := regexp.MustCompile(`(?m)^controller_runtime_reconcile_panics_total\{controller="gather-runner"\} (\d+)$`).FindSubmatch(b)
	if m == nil {
		return 0, fmt.Errorf("no count of reconcile panics in the operator's metrics")
	}
	return strconv.Atoi(string(m[1]))
}

// faultRow is bad input: a manifest (or its ops files, or the releases'
// templates) the gathering must refuse with a visible error, keeping the
// last good version in use.
type faultRow struct {
	manifest func(good string) string
	ops      []deployment.OpsFile
	// breakJobs edits a copy of the releases' jobs.
	breakJobs func(dir string)
	// invalid: the runner refuses it before any gathering.
	invalid bool
	// want is the error as the status, the Event and (for a gathering)
	// the Job's pod show it.
	want string
	// render bounds the row's gathering (none when zero).
	render ruby.Renderer
}

func replace(old, new string) func(string) string {
	return func(s string) string {
		Expect(s).To(ContainSubstring(old))
		return strings.Replace(s, old, new, 1)
	}
}

func writeTemplate(release, job, template, content string) func(string) {
	return func(dir string) {
		Expect(os.WriteFile(filepath.Join(dir, release, job, "templates", template), []byte(content), 0o644)).To(Succeed())
	}
}

func billionLaughs() string {
	var b strings.Builder
	b.WriteString("name: shop\na: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n")
	prev := "a"
	for i := range 9 {
		n := string(rune('b' + i))
		fmt.Fprintf(&b, "%s: &%s [%s]\n", n, n, strings.TrimSuffix(strings.Repeat("*"+prev+", ", 9), ", "))
		prev = n
	}
	return b.String()
}

// withWorkers is the good manifest with a new property of web: a change
// that gathers a new version of web only.
func withWorkers(good string, n int) string {
	return strings.Replace(good, "        session_secret: ((session_secret))", fmt.Sprintf("        session_secret: ((session_secret))\n        workers: %d", n), 1)
}

// newVersions are the versioned Secrets in after but not in before.
func newVersions(before, after []string) map[string]bool {
	added := map[string]bool{}
	for _, v := range after {
		added[v] = true
	}
	for _, v := range before {
		delete(added, v)
	}
	return added
}

// inUse is what a deployment's pods get: the versions the runner accepted
// (its trust record) and those the status reports.
type inUse struct {
	record   *trust.Record
	versions map[string]int
}

// Each row of the fault table is a spec of its own, on one deployment whose
// last good gathering the rows share; every row asserts, besides its
// error, that the last good versions stay in use, that nothing panicked
// and that no generated value shows in a log line, an Event or a Pod.
var _ = Describe("the fault table", Ordered, ContinueOnFailure, func() {
	const ns, operatorNS = "faults", "faults-operator"
	logs := &lockedBuffer{}
	log := logs.log()
	var (
		operator   *operatorProcess
		kubeconfig string
		good       string
		lastJob    string
		// last is what the last good gathering left in use.
		last inUse
	)

	apply := func(manifest string, ops ...deployment.OpsFile) {
		GinkgoHelper()
		_, err := fixtures.ApplyManifest(ctx, cp.Client, ns, []byte(manifest), ops...)
		Expect(err).NotTo(HaveOccurred())
	}
	manifestSecret := func() *corev1.Secret {
		GinkgoHelper()
		var s corev1.Secret
		Expect(cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: fixtures.ManifestSecret}, &s)).To(Succeed())
		return &s
	}
	gst := func() status.Gathering {
		GinkgoHelper()
		return status.GatheringOf(manifestSecret())
	}
	record := func() *trust.Record {
		GinkgoHelper()
		rec, err := trust.Read(ctx, cp.Client, operatorNS, ns, "shop")
		Expect(err).NotTo(HaveOccurred())
		return rec
	}
	gatherJobs := func() []string {
		GinkgoHelper()
		var jobs batchv1.JobList
		Expect(cp.Client.List(ctx, &jobs, client.InNamespace(ns), client.MatchingLabels{names.LabelDeployment: "shop"})).To(Succeed())
		var out []string
		for _, j := range jobs.Items {
			out = append(out, j.Name)
		}
		return out
	}
	// started waits for the gathering Job of new inputs; meanwhile the
	// status keeps the versions in use.
	started := func() *batchv1.Job {
		GinkgoHelper()
		var job batchv1.Job
		Eventually(func() bool {
			st := gst()
			if st.State != status.ReasonGatherStarted || st.Job == lastJob {
				return false
			}
			return cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: st.Job}, &job) == nil
		}).WithTimeout(20 * time.Second).Should(BeTrue())
		lastJob = job.Name
		Expect(gst().Versions).To(Equal(last.versions), "the status keeps the versions in use while a gathering starts")
		return &job
	}
	// gather does the gathering Job's work here, from the releases' jobs
	// in dir, with the plan the runner gave job (none without a job).
	var renderer ruby.Renderer
	gather := func(ctx context.Context, job *batchv1.Job, dir string) (trust.Report, error) {
		var plan gathering.Plan
		if job != nil {
			plan = jobPlan(job)
		}
		res, err := gathering.Run(ctx, cp.Client, gathering.Config{Namespace: ns, ManifestSecret: fixtures.ManifestSecret, JobsDir: dir,
			ClusterDomain: "cluster.local", Progress: gathering.Events(ctx, cp.Client, log), Plan: plan}, gathering.NewRenderBPM(ctx, renderer), time.Now())
		if err != nil {
			return trust.Report{}, err
		}
		return res.Report(), nil
	}
	// fail reports the Job failed as the kubelet and the job controller
	// would: its pod's termination message, its condition.
	fail := func(job *batchv1.Job, gatherErr error) {
		GinkgoHelper()
		jobPodTerminated(job, status.ExitInvalidInput, gatherErr.Error()+"\n")
		now := metav1.Now()
		job.Status.StartTime, job.Status.Failed = &now, 1
		job.Status.Conditions = []batchv1.JobCondition{
			{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, LastTransitionTime: now, Reason: "PodFailurePolicy"},
			{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, LastTransitionTime: now, Reason: "PodFailurePolicy"},
		}
		Expect(cp.Client.Status().Update(ctx, job)).To(Succeed())
	}
	// accepted waits for the runner to accept job's result and takes it
	// as the versions in use from now on.
	accepted := func(job *batchv1.Job) {
		GinkgoHelper()
		Eventually(func() status.Gathering { return gst() }).WithTimeout(20 * time.Second).Should(And(
			HaveField("State", status.ReasonGathered), HaveField("Job", job.Name)))
		Eventually(func() types.UID { return record().Job }).Should(Equal(job.UID))
		last = inUse{record: record(), versions: gst().Versions}
		latest := map[string]int{}
		for label, g := range last.record.Groups {
			latest[label] = g.Latest().Resolved.Version
		}
		Expect(last.versions).To(Equal(latest), "the status reports the versions the runner accepted")
	}
	// gatherAccepted runs the gathering the runner starts and has it
	// accepted.
	gatherAccepted := func() {
		GinkgoHelper()
		job := started()
		written, err := gather(ctx, job, jobsDir)
		Expect(err).NotTo(HaveOccurred())
		complete(job, written)
		accepted(job)
	}
	versionedSecrets := func() []string {
		GinkgoHelper()
		var list corev1.SecretList
		Expect(cp.Client.List(ctx, &list, client.InNamespace(ns), client.HasLabels{names.LabelVersion})).To(Succeed())
		var out []string
		for _, s := range list.Items {
			out = append(out, s.Name)
		}
		return out
	}
	// admitWeb sends a pod of web through the webhook's admission handler
	// and returns the resolved Secret it is injected with.
	admitWeb := func() string {
		GinkgoHelper()
		raw, err := json.Marshal(corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "web-z1-0", Namespace: ns, Labels: map[string]string{names.LabelDeployment: "shop",
				names.LabelInstanceGroup: "web", names.LabelAZIndex: "1", "apps.kubernetes.io/pod-index": "0"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "placeholder", Image: "busybox"}}},
		})
		Expect(err).NotTo(HaveOccurred())
		h := &webhook.Handler{Cache: cp.Client, OperatorNamespace: operatorNS, Log: log,
			Settings: inject.Settings{OperatorImage: "localhost/bosh-injector:test", DNS: inject.DNS{ClusterDomain: "cluster.local"}}}
		resp := h.Handle(ctx, admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
			Namespace: ns, Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: raw}}})
		Expect(resp.Allowed).To(BeTrue(), "%v", resp.Result)
		pod, _, err := fixtures.Patched(raw, resp.Patch)
		Expect(err).NotTo(HaveOccurred())
		for _, v := range pod.Spec.Volumes {
			if v.Secret != nil && strings.HasPrefix(v.Secret.SecretName, names.SecretPrefix("shop", names.KindResolved, "web")) {
				return v.Secret.SecretName
			}
		}
		Fail("the injected pod mounts no resolved Secret of web")
		return ""
	}
	// generated are the values of the deployment's generated variables:
	// every line of each long enough to be told apart (PEM armour is
	// the same everywhere).
	generated := func() []string {
		GinkgoHelper()
		var vars corev1.SecretList
		Expect(cp.Client.List(ctx, &vars, client.InNamespace(ns), runner.CredentialsSelector("shop"))).To(Succeed())
		var values []string
		for _, v := range vars.Items {
			for _, value := range v.Data {
				for _, line := range strings.Split(string(value), "\n") {
					if len(line) >= 16 && !strings.HasPrefix(line, "-----") {
						values = append(values, line)
					}
				}
			}
		}
		return values
	}

	BeforeAll(func() {
		for _, n := range []string{ns, operatorNS} {
			Expect(cp.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}})).To(Succeed())
		}
		var err error
		kubeconfig, err = cp.KubeconfigFile("operator")
		Expect(err).NotTo(HaveOccurred())
		operator = startOperatorProcess(operatorNS, kubeconfig, logs)
		// The one running at the end, after any kill and restart.
		DeferCleanup(func() { operator.kill() })

		manifest, err := fixtures.ShopManifest()
		Expect(err).NotTo(HaveOccurred())
		good = string(manifest)
		apply(good)
		gatherAccepted()
		Expect(last.versions).To(Equal(map[string]int{"bus": 1, "db": 1, "web": 1, "smoke-tests": 1}))
		Expect(logs.String()).To(ContainSubstring(`"msg":"gathered"`), "the operator's log is captured")
		var password corev1.Secret
		Expect(cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: names.VariableSecret("shop", "db_password")}, &password)).To(Succeed())
		Expect(generated()).To(ContainElement(string(password.Data["password"])), "the generated db password is among the values checked")
	})

	// A row is checked against the log lines and panics of its own time
	// (the first also against the good gathering's), so one that panics
	// does not fail the rows after it.
	var checked, panicsBefore int
	var rowOperator *operatorProcess
	BeforeEach(func() {
		rowOperator = operator
		Eventually(func() (err error) {
			panicsBefore, err = operator.panics()
			return err
		}).Should(Succeed())
	})
	AfterEach(func() {
		rowLogs := logs.String()[checked:]
		checked += len(rowLogs)
		// Its list of the Jobs the runner created grows with every row, and
		// its older versions go as the runner prunes their Secrets.
		latest := func(r *trust.Record) map[string]trust.Version {
			out := map[string]trust.Version{}
			for label, g := range r.Groups {
				out[label] = *g.Latest()
			}
			return out
		}
		Expect(record().Job).To(Equal(last.record.Job), "the trust record keeps the last good gathering")
		Expect(latest(record())).To(Equal(latest(last.record)), "the trust record keeps the last good versions")
		Expect(gst().Versions).To(Equal(last.versions), "the status reports the last good versions")
		Expect(admitWeb()).To(Equal(last.record.Groups["web"].Latest().Resolved.Name), "a new pod of web gets the last good version")
		if operator != rowOperator {
			panicsBefore = 0
		}
		Eventually(operator.panics).Should(Equal(panicsBefore), "controller-runtime recovered from a panic")
		cp.ExpectNothingLeaked(ns, rowLogs, generated()...)
	})

	DescribeTable("bad input: a visible error naming what is wrong; the last good version stays in use",
		func(row faultRow) {
			manifest := good
			if row.manifest != nil {
				manifest = row.manifest(manifest)
			}
			// Broken templates come with a new release version: new inputs.
			manifest += "# " + CurrentSpecReport().LeafNodeText + "\n"
			apply(manifest, row.ops...)
			want := status.ReasonGatherFailed
			if row.invalid {
				want = status.ReasonInvalidManifest
			} else {
				dir := jobsDir
				if row.breakJobs != nil {
					dir = GinkgoT().TempDir()
					Expect(os.CopyFS(dir, os.DirFS(jobsDir))).To(Succeed())
					row.breakJobs(dir)
				}
				job := started()
				renderer = row.render
				_, err := gather(ctx, job, dir)
				renderer = ruby.Renderer{}
				Expect(err).To(MatchError(ContainSubstring(row.want)))
				fail(job, err)
			}
			Eventually(func() status.Gathering { return gst() }).Should(And(
				HaveField("State", want), HaveField("Message", ContainSubstring(row.want))))
			Eventually(func() ([]string, error) {
				var events corev1.EventList
				err := cp.Client.List(ctx, &events, client.InNamespace(ns))
				var notes []string
				for _, e := range events.Items {
					if e.Reason == want && e.Type == corev1.EventTypeWarning {
						notes = append(notes, e.Message)
					}
				}
				return notes, err
			}).Should(ContainElement(ContainSubstring(row.want)), "a warning Event says it")
			fmt.Fprintf(GinkgoWriter, "%s\n", gst().Message)
		},
		Entry("malformed YAML", faultRow{manifest: func(string) string { return "name: shop\ninstance_groups: [\n" }, invalid: true,
			want: "manifest: Evaluating manifest: yaml: line 3: did not find expected node content"}),
		Entry("a YAML bomb", faultRow{manifest: func(string) string { return billionLaughs() }, invalid: true,
			want: "manifest: Evaluating manifest: yaml: document contains excessive aliasing"}),
		Entry("an unknown release", faultRow{manifest: replace("    release: bus\n", "    release: nope\n"),
			want: "- Unable to process instance group 'bus'. Errors are:\n  - Job 'bus': release 'nope' is not in the manifest's releases"}),
		Entry("an unknown job", faultRow{manifest: replace("  - name: bus\n    release: bus\n", "  - name: no-such-job\n    release: bus\n"),
			want: "- Unable to process instance group 'bus'. Errors are:\n  - Job 'no-such-job': Can't find job 'no-such-job' in release 'bus'"}),
		Entry("a failing ops file", faultRow{ops: []deployment.OpsFile{{Name: "remove-missing", Data: []byte("- type: remove\n  path: /instance_groups/name=nope\n")}}, invalid: true,
			want: "ops file ops-01-remove-missing.yaml: operation [0] (remove /instance_groups/name=nope): Expected to find exactly one matching array item for path '/instance_groups/name=nope' but found 0"}),
		Entry("a wrong property type", faultRow{manifest: replace("        admin:\n          password: ((db_password))\n", "        admin: [not, a, hash]\n"),
			want: "- Unable to process instance group 'db'. Errors are:\n  - Job 'pgstore': Property 'pgstore.admin.username' expects a hash, but received 'Array'"}),
		Entry("a Ruby syntax error", faultRow{breakJobs: writeTemplate("shop", "storefront", "storefront.yml.erb", "port: <%= p('storefront.port' %>\n"),
			want: "- Unable to render jobs for instance group 'web'. Errors are:\n  - Unable to render templates for job 'storefront'. Errors are:\n    - Error filling in template 'storefront.yml.erb' (line 1: syntax error"}),
		Entry("a raising template", faultRow{breakJobs: writeTemplate("shop", "storefront", "storefront.yml.erb", "a\n<% raise 'no storefront today' %>\n"),
			want: "- Unable to render jobs for instance group 'web'. Errors are:\n  - Unable to render templates for job 'storefront'. Errors are:\n    - Error filling in template 'storefront.yml.erb' (line 2: no storefront today)"}),
		Entry("an invalid bpm.yml", faultRow{breakJobs: writeTemplate("shop", "storefront", "bpm.yml.erb", "processes: not-a-list\n"),
			want: "- Unable to render jobs for instance group 'web'. Errors are:\n  - Unable to render templates for job 'storefront'. Errors are:\n    - Invalid BPM configuration rendered from template 'bpm.yml.erb': failed to parse job configuration: yaml: unmarshal errors:\n  line 1: cannot unmarshal !!str `not-a-list` into []bpm.Process"}),
		// Long enough for Ruby to start rendering on a loaded machine.
		Entry("a template that never ends", faultRow{breakJobs: writeTemplate("shop", "storefront", "storefront.yml.erb", "a\n<% loop {} %>\n"),
			render: ruby.Renderer{Timeout: 10 * time.Second},
			want:   "- Unable to render jobs for instance group 'web'. Errors are:\n  - Unable to render templates for job 'storefront'. Errors are:\n    - Error filling in template 'storefront.yml.erb' (rendering did not finish within the render timeout of 10s)"}),
		Entry("a template that ends Ruby", faultRow{breakJobs: writeTemplate("shop", "storefront", "storefront.yml.erb", "<% exit!(7) %>\n"),
			want: "- Unable to render jobs for instance group 'web'. Errors are:\n  - Unable to render templates for job 'storefront'. Errors are:\n    - Error filling in template 'storefront.yml.erb' (Ruby ended while rendering it: exit status 7)"}),
		Entry("a template flooding its output", faultRow{breakJobs: writeTemplate("shop", "storefront", "storefront.yml.erb", "a\n<% 2000.times do %><%= 'x' * 1000 %><% end %>\n"),
			render: ruby.Renderer{MaxOutput: 1 << 20},
			want:   "- Unable to render jobs for instance group 'web'. Errors are:\n  - Unable to render templates for job 'storefront'. Errors are:\n    - Error filling in template 'storefront.yml.erb' (line 2: the rendered output exceeds 1 MiB, the limit per template)"}),
		Entry("an unknown variable type", faultRow{manifest: replace("- name: db_password\n  type: password\n", "- name: db_password\n  type: vault-token\n"),
			want: "variable 'db_password': unsupported type 'vault-token' (supported: password, certificate, rsa, ssh)"}),
		Entry("an unknown link", faultRow{manifest: replace("        session_secret: ((session_secret))\n", "        session_secret: ((session_secret))\n    consumes: {database: {from: nowhere}}\n"),
			want: "Failed to resolve links from deployment 'shop'. See errors below:\n  - Failed to resolve link 'database' with alias 'nowhere' and type 'pgsql' from job 'storefront' in instance group 'web'. Details below:\n    - No link providers found"}),
		Entry("duplicate instance groups", faultRow{manifest: replace("- name: db\n", "- name: bus\n"), want: "Duplicate instance group name 'bus'"}),
	)

	It("reports a gathering Job stopped at its deadline; the last good version stays in use", func() {
		apply(good + "# deadline\n")
		job := started()
		Expect(job.Spec.ActiveDeadlineSeconds).To(HaveValue(Equal(int64(runner.DefaultGatherDeadline.Seconds()))))
		now := metav1.Now()
		job.Status.StartTime, job.Status.Failed = &now, 1
		job.Status.Conditions = []batchv1.JobCondition{
			{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, LastTransitionTime: now, Reason: batchv1.JobReasonDeadlineExceeded},
			{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, LastTransitionTime: now, Reason: batchv1.JobReasonDeadlineExceeded},
		}
		Expect(cp.Client.Status().Update(ctx, job)).To(Succeed())
		Eventually(func() status.Gathering { return gst() }).Should(And(HaveField("State", status.ReasonGatherFailed),
			HaveField("Message", fmt.Sprintf("gathering Job %s exceeded its deadline of 30m0s (activeDeadlineSeconds) and was stopped", job.Name))))
	})

	It("refuses an oversized manifest at the API server; the manifest Secret stays as it was", func() {
		before := manifestSecret()
		_, err := fixtures.ApplyManifest(ctx, cp.Client, ns, append([]byte(good), bytes.Repeat([]byte("# padding\n"), 110_000)...))
		Expect(err).To(MatchError(fmt.Sprintf("Secret %q is invalid: data: Too long: may not be more than 1048576 bytes", fixtures.ManifestSecret)))
		Expect(manifestSecret().ResourceVersion).To(Equal(before.ResourceVersion))
	})

	It("converges after the operator is killed (SIGKILL) during a gathering: that gathering's versions are accepted once, none lost", func() {
		before, beforeRecord := versionedSecrets(), last.record
		apply(withWorkers(good, 3))
		job := started()
		operator.kill()
		written, err := gather(ctx, job, jobsDir)
		Expect(err).NotTo(HaveOccurred())
		complete(job, written)
		operator = startOperatorProcess(operatorNS, kubeconfig, logs)
		accepted(job)
		// One new resolved and BPM version of web, no other, and no
		// second gathering of the same inputs.
		Expect(newVersions(before, versionedSecrets())).To(HaveLen(2))
		Eventually(gatherJobs).Should(ConsistOf(job.Name))
		for label, g := range beforeRecord.Groups {
			now := last.record.Groups[label]
			if label != "web" {
				Expect(now).To(Equal(g), label)
				continue
			}
			Expect(now.Versions).To(HaveLen(len(g.Versions) + 1))
			Expect(now.Versions[:len(g.Versions)]).To(Equal(g.Versions))
			Expect(now.Latest().Resolved.Version).To(Equal(g.Latest().Resolved.Version + 1))
		}
	})

	It("converges after the API server is restarted during a gathering: the Job's retry completes it, no mixed versions", func() {
		before := versionedSecrets()
		apply(withWorkers(good, 6))
		job := started()
		Expect(cp.RestartAPIServer(func() {
			// The pod's first run meets no apiserver: an API error (exit 3),
			// which the Job retries.
			down, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			_, err := gather(down, job, jobsDir)
			Expect(err).To(HaveOccurred())
		})).To(Succeed())
		var written trust.Report
		Eventually(func() (err error) {
			written, err = gather(ctx, job, jobsDir)
			return err
		}).WithTimeout(20 * time.Second).Should(Succeed())
		Eventually(func() error { return cp.Client.Get(ctx, client.ObjectKeyFromObject(job), job) }).Should(Succeed())
		complete(job, written)
		accepted(job)
		Expect(newVersions(before, versionedSecrets())).To(HaveLen(2), "one new resolved and BPM version of web")
	})

	It("gathers the last of two quick manifest changes, no mixed versions", func() {
		before := versionedSecrets()
		apply(withWorkers(good, 4))
		apply(withWorkers(good, 5))
		// Every Job started runs (each reads the manifest as it is when it
		// runs) until the runner reports the last inputs gathered.
		started()
		var job batchv1.Job
		Eventually(func() string {
			st := gst()
			if st.State == status.ReasonGatherStarted && cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: st.Job}, &job) == nil && len(job.Status.Conditions) == 0 {
				written, err := gather(ctx, &job, jobsDir)
				Expect(err).NotTo(HaveOccurred())
				complete(&job, written)
			}
			return st.State
		}).WithTimeout(20 * time.Second).Should(Equal(status.ReasonGathered))
		accepted(&job)
		// Only web changed, and every version written holds workers 5 (a
		// Job may write again what an earlier Job wrote and the runner had
		// not accepted yet: it builds on accepted versions only).
		added := newVersions(before, versionedSecrets())
		Expect(added).NotTo(BeEmpty())
		for name := range added {
			Expect(name).To(HavePrefix("shop."), name)
			Expect(name).To(ContainSubstring(".web-v"), name)
			if strings.HasPrefix(name, "shop.bpm.") {
				var s corev1.Secret
				Expect(cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &s)).To(Succeed())
				Expect(string(s.Data["bpm.json"])).To(ContainSubstring(`"STOREFRONT_WORKERS":"5"`), name)
			}
		}
		Expect(added).To(HaveKey(last.record.Groups["web"].Latest().BPM.Name))
	})

	It("keeps the credentials when the manifest Secret is deleted, starts nothing, and gathers with them when it is back", func() {
		credentials := func() map[string]string {
			GinkgoHelper()
			var vars corev1.SecretList
			Expect(cp.Client.List(ctx, &vars, client.InNamespace(ns), runner.CredentialsSelector("shop"))).To(Succeed())
			out := map[string]string{}
			for _, v := range vars.Items {
				out[v.Name] = string(v.UID) + fmt.Sprint(v.Data)
			}
			return out
		}
		kept := credentials()
		Expect(kept).NotTo(BeEmpty())
		Expect(cp.Client.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fixtures.ManifestSecret}})).To(Succeed())
		// What the manifest owns goes: its Jobs and versions.
		Eventually(versionedSecrets).WithTimeout(30 * time.Second).Should(BeEmpty())
		Eventually(gatherJobs).WithTimeout(30 * time.Second).Should(BeEmpty())
		Consistently(gatherJobs, 2*time.Second).Should(BeEmpty(), "no gathering without a manifest")
		Expect(credentials()).To(Equal(kept))
		// A gathering still running then fails cleanly.
		_, err := gather(ctx, nil, jobsDir)
		Expect(err).To(MatchError(ContainSubstring(fmt.Sprintf("%q not found", fixtures.ManifestSecret))))

		// The versions in use went with the manifest Secret: a new one
		// has none until its first gathering.
		last.versions = nil
		apply(good)
		gatherAccepted()
		Expect(credentials()).To(Equal(kept), "the same credentials, not new ones")
	})
})

func freePort() int {
	GinkgoHelper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
