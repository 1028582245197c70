package runner_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bosh-injector/bosh-injector/gather/deployment"
	"github.com/bosh-injector/bosh-injector/gather/gathering"
	"github.com/bosh-injector/bosh-injector/gather/names"
	"github.com/bosh-injector/bosh-injector/gather/runner"
	"github.com/bosh-injector/bosh-injector/test/fixtures"
	"github.com/bosh-injector/bosh-injector/webhook"
)

// lockedBuffer collects every log line of a run, for the check that no
// generated value is ever logged.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) log() logr.Logger {
	return funcr.New(func(prefix, args string) {
		b.mu.Lock()
		defer b.mu.Unlock()
		fmt.Fprintln(&b.buf, prefix, args)
	}, funcr.Options{Verbosity: 10})
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// faultRow is bad input: a manifest (or its ops files, or the releases'
// templates) the gathering must refuse with a visible error, keeping the
// last good version in use.
type faultRow struct {
	name     string
	manifest func(good string) string
	ops      []deployment.OpsFile
	// breakJobs edits a copy of the releases' jobs.
	breakJobs func(dir string)
	// invalid: the runner refuses it before any gathering.
	invalid bool
	want    string
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

var faultRows = []faultRow{
	{name: "malformed YAML", manifest: func(string) string { return "name: shop\ninstance_groups: [\n" }, invalid: true, want: "line"},
	{name: "a YAML bomb", manifest: func(string) string { return billionLaughs() }, invalid: true, want: "document expands to too many values through aliases"},
	{name: "an unknown release", manifest: replace("    release: bus\n", "    release: nope\n"), want: "nope"},
	{name: "an unknown job", manifest: replace("  - name: bus\n    release: bus\n", "  - name: no-such-job\n    release: bus\n"), want: "no-such-job"},
	{name: "a failing ops file", ops: []deployment.OpsFile{{Name: "remove-missing", Data: []byte("- type: remove\n  path: /instance_groups/name=nope\n")}}, invalid: true, want: "nope"},
	{name: "a wrong property type", manifest: replace("        admin:\n          password: ((db_password))\n", "        admin: [not, a, hash]\n"), want: "Property 'pgstore.admin.username' expects a hash, but received 'Array'"},
	{name: "a Ruby syntax error", breakJobs: writeTemplate("shop", "storefront", "storefront.yml.erb", "port: <%= p('storefront.port' %>\n"),
		want: "Error filling in template 'storefront.yml.erb' (line 1: syntax error"},
	{name: "a raising template", breakJobs: writeTemplate("shop", "storefront", "storefront.yml.erb", "a\n<% raise 'no storefront today' %>\n"),
		want: "- Unable to render jobs for instance group 'web'. Errors are:\n  - Unable to render templates for job 'storefront'. Errors are:\n    - Error filling in template 'storefront.yml.erb' (line 2: no storefront today)"},
	{name: "an invalid bpm.yml", breakJobs: writeTemplate("shop", "storefront", "bpm.yml.erb", "processes: not-a-list\n"),
		want: "    - Invalid BPM configuration rendered from template 'bpm.yml.erb': failed to parse job configuration"},
	{name: "an unknown variable type", manifest: replace("- name: db_password\n  type: password\n", "- name: db_password\n  type: vault-token\n"), want: "variable 'db_password': unsupported type 'vault-token'"},
	{name: "an unknown link", manifest: replace("        session_secret: ((session_secret))\n", "        session_secret: ((session_secret))\n    consumes: {database: {from: nowhere}}\n"), want: "nowhere"},
	{name: "duplicate instance groups", manifest: replace("- name: db\n", "- name: bus\n"), want: "Duplicate instance group name 'bus'"},
}

var _ = Describe("the fault table", func() {
	It("refuses every bad input with a visible error, no panic, the last good version in use and no generated value in any log line or Event; and converges after faults", func() {
		ns := "faults"
		Expect(cp.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		logs := &lockedBuffer{}
		log := logs.log()
		operator := func() context.CancelFunc {
			mgr, err := webhook.NewManager(cp.Config, webhook.Options{Namespace: ns, OperatorImage: "localhost/bosh-injector:test",
				ClusterDomain: "cluster.local", Runner: true}, log)
			Expect(err).NotTo(HaveOccurred())
			mctx, cancel := context.WithCancel(ctx)
			done := make(chan struct{})
			go func() {
				defer GinkgoRecover()
				defer close(done)
				Expect(mgr.Start(mctx)).To(Succeed())
			}()
			stop := func() { cancel(); <-done }
			DeferCleanup(stop)
			return stop
		}
		stopOperator := operator()

		good, err := fixtures.ShopManifest()
		Expect(err).NotTo(HaveOccurred())
		apply := func(manifest string, ops ...deployment.OpsFile) {
			GinkgoHelper()
			_, err := fixtures.ApplyManifest(ctx, cp.Client, ns, []byte(manifest), ops...)
			Expect(err).NotTo(HaveOccurred())
		}
		status := func() runner.Status {
			var s corev1.Secret
			Expect(cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: fixtures.ManifestSecret}, &s)).To(Succeed())
			return runner.StatusOf(&s)
		}
		lastJob := ""
		// started waits for the gathering Job of new inputs.
		started := func() *batchv1.Job {
			GinkgoHelper()
			var job batchv1.Job
			Eventually(func() bool {
				st := status()
				if st.State != runner.ReasonGatherStarted || st.Job == lastJob {
					return false
				}
				return cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: st.Job}, &job) == nil
			}).WithTimeout(20 * time.Second).Should(BeTrue())
			lastJob = job.Name
			return &job
		}
		gather := func(jobsDir string) error {
			_, err := gathering.Run(ctx, cp.Client, gathering.Config{Namespace: ns, ManifestSecret: fixtures.ManifestSecret, JobsDir: jobsDir,
				ClusterDomain: "cluster.local", Progress: gathering.Events(ctx, cp.Client, log)}, gathering.NewRenderBPM(ctx), time.Now())
			return err
		}
		// finish reports the Job's end as the kubelet and the job
		// controller would: its pod's termination message, its condition.
		finish := func(job *batchv1.Job, gatherErr error) {
			GinkgoHelper()
			now := metav1.Now()
			job.Status.StartTime = &now
			if gatherErr == nil {
				job.Status.CompletionTime, job.Status.Succeeded = &now, 1
				job.Status.Conditions = []batchv1.JobCondition{
					{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: now},
					{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now},
				}
			} else {
				pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: job.Name + "-pod", Namespace: ns, Labels: map[string]string{batchv1.JobNameLabel: job.Name}},
					Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "gather", Image: "x"}}}}
				Expect(cp.Client.Create(ctx, pod)).To(Succeed())
				pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "gather", State: corev1.ContainerState{
					Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Message: gatherErr.Error() + "\n"}}}}
				Expect(cp.Client.Status().Update(ctx, pod)).To(Succeed())
				job.Status.Failed = 1
				job.Status.Conditions = []batchv1.JobCondition{
					{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, LastTransitionTime: now, Reason: "BackoffLimitExceeded"},
					{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, LastTransitionTime: now, Reason: "BackoffLimitExceeded"},
				}
			}
			Expect(cp.Client.Status().Update(ctx, job)).To(Succeed())
		}
		versions := func() []string {
			GinkgoHelper()
			var list corev1.SecretList
			Expect(cp.Client.List(ctx, &list, client.InNamespace(ns), client.HasLabels{names.LabelVersion})).To(Succeed())
			var out []string
			for _, s := range list.Items {
				out = append(out, s.Name)
			}
			return out
		}

		By("a good deployment")
		apply(string(good))
		job := started()
		Expect(gather(jobsDir)).To(Succeed())
		finish(job, nil)
		Eventually(func() string { return status().State }).Should(Equal(runner.ReasonGathered))
		goodVersions := versions()
		Expect(goodVersions).NotTo(BeEmpty())

		for _, row := range faultRows {
			By(row.name)
			manifest := string(good)
			if row.manifest != nil {
				manifest = row.manifest(manifest)
			}
			// Broken templates come with a new release version: new inputs.
			manifest += "# " + row.name + "\n"
			apply(manifest, row.ops...)
			if row.invalid {
				Eventually(func() runner.Status { return status() }).Should(And(
					HaveField("State", runner.ReasonInvalidManifest), HaveField("Message", ContainSubstring(row.want))), row.name)
			} else {
				dir := jobsDir
				if row.breakJobs != nil {
					dir = GinkgoT().TempDir()
					Expect(os.CopyFS(dir, os.DirFS(jobsDir))).To(Succeed())
					row.breakJobs(dir)
				}
				job := started()
				err := gather(dir)
				Expect(err).To(MatchError(ContainSubstring(row.want)), row.name)
				finish(job, err)
				Eventually(func() runner.Status { return status() }).Should(And(
					HaveField("State", runner.ReasonGatherFailed), HaveField("Message", ContainSubstring(row.want))), row.name)
			}
			Expect(versions()).To(ConsistOf(goodVersions), "%s: the last good version stays in use", row.name)
			fmt.Fprintf(GinkgoWriter, "%s: %s\n", row.name, status().Message)
		}

		By("an oversized manifest: the API server refuses it, the last good one stays")
		_, err = fixtures.ApplyManifest(ctx, cp.Client, ns, append(good, bytes.Repeat([]byte("# padding\n"), 110_000)...))
		Expect(err).To(MatchError(ContainSubstring("Too long")))
		Expect(versions()).To(ConsistOf(goodVersions))

		By("the operator killed during a gathering: restarted, it converges")
		apply(strings.Replace(string(good), "        session_secret: ((session_secret))", "        session_secret: ((session_secret))\n        workers: 3", 1))
		job = started()
		stopOperator()
		Expect(gather(jobsDir)).To(Succeed())
		finish(job, nil)
		operator()
		Eventually(func() string { return status().State }).WithTimeout(20 * time.Second).Should(Equal(runner.ReasonGathered))
		Expect(status().Job).To(Equal(job.Name))

		By("the apiserver restarted during a gathering: the Job's retry completes it, no mixed versions")
		before := versions()
		apply(strings.Replace(string(good), "        session_secret: ((session_secret))", "        session_secret: ((session_secret))\n        workers: 6", 1))
		job = started()
		Expect(cp.RestartAPIServer(func() {
			// The pod's first run meets no apiserver: an API error (exit 3),
			// which the Job retries.
			down, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			_, err := gathering.Run(down, cp.Client, gathering.Config{Namespace: ns, ManifestSecret: fixtures.ManifestSecret, JobsDir: jobsDir,
				ClusterDomain: "cluster.local", Progress: gathering.Events(down, cp.Client, log)}, gathering.NewRenderBPM(down), time.Now())
			Expect(err).To(HaveOccurred())
		})).To(Succeed())
		Eventually(func() error { return gather(jobsDir) }).WithTimeout(20 * time.Second).Should(Succeed())
		Eventually(func() error {
			return cp.Client.Get(ctx, client.ObjectKeyFromObject(job), job)
		}).Should(Succeed())
		finish(job, nil)
		Eventually(func() string { return status().State }).WithTimeout(20 * time.Second).Should(Equal(runner.ReasonGathered))
		Expect(status().Job).To(Equal(job.Name))
		Expect(newVersions(before, versions())).To(HaveLen(2), "one new resolved and BPM version of web")

		By("the manifest changed twice quickly: the last wins, no mixed versions")
		before = versions()
		apply(strings.Replace(string(good), "        session_secret: ((session_secret))", "        session_secret: ((session_secret))\n        workers: 4", 1))
		apply(strings.Replace(string(good), "        session_secret: ((session_secret))", "        session_secret: ((session_secret))\n        workers: 5", 1))
		// Every Job started runs (each reads the manifest as it is when it
		// runs) until the runner reports the last inputs gathered.
		started()
		Eventually(func() string {
			st := status()
			var job batchv1.Job
			if st.State == runner.ReasonGatherStarted && cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: st.Job}, &job) == nil && len(job.Status.Conditions) == 0 {
				Expect(gather(jobsDir)).To(Succeed())
				finish(&job, nil)
			}
			return st.State
		}).WithTimeout(20 * time.Second).Should(Equal(runner.ReasonGathered))
		added := newVersions(before, versions())
		// One new resolved and BPM version of web, with workers 5.
		Expect(added).To(HaveLen(2))
		var webBPM corev1.Secret
		for v := range added {
			if strings.Contains(v, ".bpm.") {
				Expect(cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: v}, &webBPM)).To(Succeed())
			}
		}
		Expect(string(webBPM.Data["bpm.json"])).To(ContainSubstring(`"STOREFRONT_WORKERS":"5"`))

		By("the manifest Secret deleted: the gathering fails cleanly, the credentials stay")
		Expect(cp.Client.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fixtures.ManifestSecret}})).To(Succeed())
		Expect(gather(jobsDir)).To(MatchError(ContainSubstring("not found")))
		var vars corev1.SecretList
		Expect(cp.Client.List(ctx, &vars, client.InNamespace(ns), runner.CredentialsSelector("shop"))).To(Succeed())
		Expect(vars.Items).NotTo(BeEmpty())

		By("no generated value in any log line or Event")
		var events eventsv1.EventList
		Expect(cp.Client.List(ctx, &events, client.InNamespace(ns))).To(Succeed())
		var seen strings.Builder
		seen.WriteString(logs.String())
		for _, e := range events.Items {
			seen.WriteString(e.Note + "\n")
		}
		var core corev1.EventList
		Expect(cp.Client.List(ctx, &core, client.InNamespace(ns))).To(Succeed())
		for _, e := range core.Items {
			seen.WriteString(e.Message + "\n")
		}
		Expect(seen.String()).To(ContainSubstring(runner.ReasonGatherFailed))
		for _, v := range vars.Items {
			for key, value := range v.Data {
				for _, line := range strings.Split(string(value), "\n") {
					if len(line) >= 16 && !strings.HasPrefix(line, "-----") {
						Expect(seen.String()).NotTo(ContainSubstring(line), "%s key %s", v.Name, key)
					}
				}
			}
		}
	})
})
