package runner_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/bosh-injector/bosh-injector/gather/configserver"
	"github.com/bosh-injector/bosh-injector/gather/configserver/auth"
	"github.com/bosh-injector/bosh-injector/gather/configserver/director"
	"github.com/bosh-injector/bosh-injector/gather/gathering"
	"github.com/bosh-injector/bosh-injector/gather/gathering/trust"
	"github.com/bosh-injector/bosh-injector/gather/names"
	"github.com/bosh-injector/bosh-injector/gather/operator/manager"
	"github.com/bosh-injector/bosh-injector/gather/operator/runner"
	"github.com/bosh-injector/bosh-injector/gather/render/resolved"
	"github.com/bosh-injector/bosh-injector/gather/render/ruby"
	"github.com/bosh-injector/bosh-injector/test/fixtures"
)

// serverFixture is a config server run in this process for namespace ns,
// with directors' names, clients (Secret name to client secret, the
// client named after its Secret with dashes as underscores), and the
// file of its CA for the operator.
type serverFixture struct {
	*fixtures.ConfigServer
	serving *fixtures.Serving
	caFile  string
}

func startServer(ns string, directors director.Directors, clients map[string]string) *serverFixture {
	GinkgoHelper()
	Expect(cp.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	var authClients []auth.Client
	for secretName, secret := range clients {
		Expect(cp.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: secretName},
			Data: map[string][]byte{"secret": []byte(secret)}})).To(Succeed())
		authClients = append(authClients, auth.Client{Name: strings.ReplaceAll(secretName, "-", "_"), SecretName: secretName})
	}
	serving, err := fixtures.NewServing(GinkgoT().TempDir())
	Expect(err).NotTo(HaveOccurred())
	srv, err := fixtures.StartConfigServer(ctx, cp.Config, configserver.Options{Namespace: ns, Directors: directors, Audience: director.Audience,
		Clients: authClients, SigningKeySecret: "token-key", CertDir: serving.Dir}, serving, GinkgoLogr)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(srv.Stop)
	caFile := filepath.Join(GinkgoT().TempDir(), "ca.crt")
	Expect(os.WriteFile(caFile, serving.CAPEM, 0o600)).To(Succeed())
	return &serverFixture{ConfigServer: srv, serving: serving, caFile: caFile}
}

// clientOf is a client of the server as OAuth client name (as a director
// or the credhub CLI uses it).
func (s *serverFixture) clientOf(name, secret string) *director.Client {
	GinkgoHelper()
	tokens := &director.ClientCredentials{TokenURL: s.URL + "/oauth/token", ClientID: name, ClientSecret: secret, HTTP: s.serving.Client}
	c, err := director.NewClient(s.URL+"/api/", s.serving.Client, tokens)
	Expect(err).NotTo(HaveOccurred())
	return c
}

// gatheringJob waits for the gathering Job of namespace ns whose UID is
// not not.
func gatheringJob(ns string, not types.UID) *batchv1.Job {
	GinkgoHelper()
	var found *batchv1.Job
	Eventually(func() bool {
		var jobs batchv1.JobList
		Expect(cp.Client.List(ctx, &jobs, client.InNamespace(ns))).To(Succeed())
		for i := range jobs.Items {
			if jobs.Items[i].UID != not && jobs.Items[i].DeletionTimestamp == nil {
				found = &jobs.Items[i]
				return true
			}
		}
		return false
	}).WithTimeout(20 * time.Second).Should(BeTrue())
	return found
}

// projections are the sources of the projected volumes of job's pods.
func projections(job *batchv1.Job) []corev1.VolumeProjection {
	var out []corev1.VolumeProjection
	for _, v := range job.Spec.Template.Spec.Volumes {
		if v.Projected != nil {
			out = append(out, v.Projected.Sources...)
		}
	}
	return out
}

// tokenClient is a client of the server with a token of sa for it, as the
// kubelet projects it into a gathering's pod.
func (s *serverFixture) tokenClient(sa *corev1.ServiceAccount) *director.Client {
	GinkgoHelper()
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{Audiences: []string{director.Audience}, ExpirationSeconds: ptr.To[int64](600)}}
	Expect(cp.Client.SubResource("token").Create(ctx, sa, tr)).To(Succeed())
	tokenFile := filepath.Join(GinkgoT().TempDir(), "token")
	Expect(os.WriteFile(tokenFile, []byte(tr.Status.Token), 0o600)).To(Succeed())
	c, err := director.NewClient(s.URL+"/api/", s.serving.Client, director.TokenFile(tokenFile))
	Expect(err).NotTo(HaveOccurred())
	return c
}

// The runner with the embedded config server, run in this process on the
// real control plane: the Job's ServiceAccount token is checked by
// TokenReview.
var _ = Describe("the job runner with a config server", func() {
	const ns, directorName = "runner-config-server", "bosh-injector"

	It("gathers through it as the Job's ServiceAccount, records the variable set, reads the same inputs again at its ids and a redeploy at the current values", func() {
		srv := startServer(ns, director.Directors{Default: directorName}, map[string]string{"admin": "admin-secret"})
		startOperatorWith(manager.Options{Namespace: ns, OperatorImage: "localhost/bosh-injector:test", ClusterDomain: "cluster.local", Runner: true,
			ConfigServer: runner.ConfigServer{Mode: director.ModeEmbedded, URL: srv.URL + "/api/", CAFile: srv.caFile, Directors: director.Directors{Default: directorName}}})
		manifest, err := fixtures.ShopManifest()
		Expect(err).NotTo(HaveOccurred())
		_, err = fixtures.ApplyManifest(ctx, cp.Client, ns, manifest)
		Expect(err).NotTo(HaveOccurred())

		job := gatheringJob(ns, "")

		// The Job reaches the server with a token of its own for it, beside
		// the API's (which templates cannot read), and the server's CA.
		gather := job.Spec.Template.Spec.Containers[0]
		Expect(gather.Args).To(ContainElements("--config-server-url="+srv.URL+"/api/", "--director-name="+directorName, "--deployment-name=shop"))
		Expect(gather.Env).To(ContainElement(corev1.EnvVar{Name: "BOSH_INJECTOR_CONFIG_SERVER_CA", Value: string(srv.serving.CAPEM)}))
		Expect(projections(job)).To(ContainElement(HaveField("ServiceAccountToken", HaveValue(And(HaveField("Audience", director.Audience), HaveField("Path", "config-server-token"))))))
		var sa corev1.ServiceAccount
		Expect(cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "shop-gather"}, &sa)).To(Succeed())
		Expect(sa.Annotations).To(HaveKeyWithValue(director.AnnotationDeployment, "shop"))
		// It reads no variable Secret.
		var role rbacv1.Role
		Expect(cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "shop-gather"}, &role)).To(Succeed())
		for _, rule := range role.Rules {
			Expect(slices.ContainsFunc(rule.ResourceNames, func(n string) bool { return strings.Contains(n, ".var-") })).To(BeFalse(), "%v", rule)
		}

		// gatherAs does the Job's work here with its ServiceAccount's
		// rights and its token for the server, as its pod would.
		cfg := rest.CopyConfig(cp.Config)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":shop-gather",
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}}
		saClient, err := client.New(cfg, client.Options{})
		Expect(err).NotTo(HaveOccurred())
		gatherAs := func(job *batchv1.Job) trust.Report {
			GinkgoHelper()
			res, err := gathering.Run(ctx, saClient, gathering.Config{Namespace: ns, ManifestSecret: fixtures.ManifestSecret, JobsDir: jobsDir, ClusterDomain: "cluster.local",
				Plan: jobPlan(job), ConfigServer: &gathering.ConfigServer{Client: srv.tokenClient(&sa), Director: directorName, Deployment: "shop"}},
				gathering.NewRenderBPM(ctx, ruby.Renderer{}), time.Now())
			Expect(err).NotTo(HaveOccurred())
			return res.Report()
		}
		record := func() (*trust.Record, error) { return trust.Read(ctx, cp.Client, ns, ns, "shop") }
		resolvedDB := func(version string) (string, error) {
			var s corev1.Secret
			err := cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "shop.ig-resolved.db-" + version}, &s)
			return string(s.Data[resolved.Key]), err
		}

		Expect(jobPlan(job).PinVariables).To(BeFalse())
		complete(job, gatherAs(job))
		Eventually(record).Should(HaveField("VariableSet", HaveValue(HaveField("Name", "shop.variables.set-v1"))))
		rec, err := record()
		Expect(err).NotTo(HaveOccurred())
		Expect(rec.Digest).To(Equal(job.Annotations[names.Prefix+"inputs-digest"]))
		var set corev1.Secret
		Expect(cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "shop.variables.set-v1"}, &set)).To(Succeed())
		var ids map[string]string
		Expect(json.Unmarshal(set.Data[names.VariableSetKey], &ids)).To(Succeed())
		Expect(ids).To(HaveKey("/bosh-injector/shop/db_password"))
		first, err := resolvedDB("v1")
		Expect(err).NotTo(HaveOccurred())
		// The certificates' expiry, read from the server's store.
		Eventually(func() ([]string, error) {
			families, err := metrics.Registry.Gather()
			var variables []string
			for _, f := range families {
				if f.GetName() != "bosh_injector_certificate_expiry_seconds" {
					continue
				}
				for _, m := range f.GetMetric() {
					for _, l := range m.GetLabel() {
						if l.GetName() == "variable" && m.GetGauge().GetValue() > 300*24*3600 {
							variables = append(variables, l.GetValue())
						}
					}
				}
			}
			return variables, err
		}).Should(ContainElements("/bosh-injector/shop/bus_tls", "/bosh-injector/shop/bus_ca"))

		// Someone sets the password on the server.
		_, err = srv.clientOf("admin", "admin-secret").Set(ctx, "/bosh-injector/shop/db_password", "password", "set-on-the-server-since")
		Expect(err).NotTo(HaveOccurred())

		// The Job is pruned: the same inputs gather again, at the ids the
		// accepted set recorded, and render exactly what they rendered.
		Expect(cp.Client.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
		again := gatheringJob(ns, job.UID)
		Expect(jobPlan(again).PinVariables).To(BeTrue())
		Expect(jobPlan(again).VariableSet).To(Equal("shop.variables.set-v1"))
		report := gatherAs(again)
		Expect(report.Groups["db"].Resolved).To(Equal(1), "nothing new to roll")
		complete(again, report)
		same, err := resolvedDB("v1")
		Expect(err).NotTo(HaveOccurred())
		Expect(same).To(Equal(first))
		Expect(same).NotTo(ContainSubstring("set-on-the-server-since"))

		// A deploy of the unchanged manifest (`bosh deploy` again) takes the
		// current values, and the group using the password rolls.
		var m corev1.Secret
		Expect(cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: fixtures.ManifestSecret}, &m)).To(Succeed())
		patch := client.MergeFrom(m.DeepCopy())
		metav1.SetMetaDataAnnotation(&m.ObjectMeta, names.AnnotationRedeploy, "1")
		Expect(cp.Client.Patch(ctx, &m, patch)).To(Succeed())
		deploy := gatheringJob(ns, again.UID)
		Expect(jobPlan(deploy).PinVariables).To(BeFalse())
		report = gatherAs(deploy)
		Expect(report.Groups["db"].Resolved).To(Equal(2))
		complete(deploy, report)
		Eventually(record).Should(HaveField("VariableSet", HaveValue(HaveField("Name", "shop.variables.set-v2"))))
		Expect(resolvedDB("v2")).To(ContainSubstring("set-on-the-server-since"))
	})
})

var _ = Describe("a deployment moving from variable Secrets onto the config server", func() {
	const ns, directorName = "runner-migration", "bosh-injector"

	It("imports the Secrets' values the server lacks, renders them unchanged, and leaves the Secrets", func() {
		srv := startServer(ns, director.Directors{Default: directorName}, nil)
		// run starts an operator and returns how to stop it.
		run := func(o manager.Options) func() {
			GinkgoHelper()
			mgr, err := manager.New(cp.Config, o, GinkgoLogr)
			Expect(err).NotTo(HaveOccurred())
			mctx, cancel := context.WithCancel(ctx)
			done := make(chan struct{})
			go func() {
				defer GinkgoRecover()
				defer close(done)
				_ = mgr.Start(mctx)
			}()
			return func() { cancel(); <-done }
		}
		o := manager.Options{Namespace: ns, OperatorImage: "localhost/bosh-injector:test", ClusterDomain: "cluster.local", Runner: true}
		manifest, err := fixtures.ShopManifest()
		Expect(err).NotTo(HaveOccurred())
		// In Secrets, as before.
		stop := run(o)
		_, err = fixtures.ApplyManifest(ctx, cp.Client, ns, manifest)
		Expect(err).NotTo(HaveOccurred())
		first := gatheringJob(ns, "")
		res, err := gathering.Run(ctx, cp.Client, gathering.Config{Namespace: ns, ManifestSecret: fixtures.ManifestSecret, JobsDir: jobsDir, ClusterDomain: "cluster.local", Plan: jobPlan(first)},
			gathering.NewRenderBPM(ctx, ruby.Renderer{}), time.Now())
		Expect(err).NotTo(HaveOccurred())
		complete(first, res.Report())
		Eventually(func() (*trust.Record, error) { return trust.Read(ctx, cp.Client, ns, ns, "shop") }).Should(HaveField("Groups", HaveLen(4)))
		var password corev1.Secret
		Expect(cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "shop.var-db-password"}, &password)).To(Succeed())
		stop()

		// The operator now has the config server: the deployment gathers
		// again, importing every variable.
		o.ConfigServer = runner.ConfigServer{Mode: director.ModeEmbedded, URL: srv.URL + "/api/", CAFile: srv.caFile, Directors: director.Directors{Default: directorName}}
		DeferCleanup(run(o))
		moved := gatheringJob(ns, first.UID)
		plan := jobPlan(moved)
		Expect(plan.Import).To(ContainElements("db_password", "bus_tls", "session_secret"))
		var sa corev1.ServiceAccount
		Eventually(func() (map[string]string, error) {
			err := cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "shop-gather"}, &sa)
			return sa.Annotations, err
		}).Should(HaveKeyWithValue(director.AnnotationDeployment, "shop"))
		res, err = gathering.Run(ctx, cp.Client, gathering.Config{Namespace: ns, ManifestSecret: fixtures.ManifestSecret, JobsDir: jobsDir, ClusterDomain: "cluster.local",
			Progress: gathering.Events(ctx, cp.Client, GinkgoLogr), Plan: plan,
			ConfigServer: &gathering.ConfigServer{Client: srv.tokenClient(&sa), Director: directorName, Deployment: "shop"}},
			gathering.NewRenderBPM(ctx, ruby.Renderer{}), time.Now())
		Expect(err).NotTo(HaveOccurred())
		// Nothing rolls: every group renders what it rendered.
		for _, g := range res.Groups {
			Expect(g.Resolved.Created).To(BeFalse(), "instance group %s", g.InstanceGroup)
		}
		complete(moved, res.Report())
		Eventually(func() ([]string, error) {
			var events eventsv1.EventList
			err := cp.Client.List(ctx, &events, client.InNamespace(ns))
			var notes []string
			for _, e := range events.Items {
				if e.Reason == gathering.ReasonVariablesImported {
					notes = append(notes, e.Note)
				}
			}
			return notes, err
		}).Should(ContainElement(And(ContainSubstring("db_password"), Not(ContainSubstring(string(password.Data["password"]))))))
		Expect(cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "shop.var-db-password"}, &corev1.Secret{})).To(Succeed(), "the Secret stays")
	})
})

var _ = Describe("the job runner with an external config server", func() {
	const ns, directorName = "runner-external", "my-bosh"

	It("gives the Job the UAA client's secret in its token volume and the server's flags, and the gathering gets its tokens from the UAA", func() {
		// The server is its own UAA here, as the embedded one is.
		srv := startServer(ns, director.Directors{Default: directorName}, map[string]string{"director-to-credhub": "uaa-client-secret-value"})
		startOperatorWith(manager.Options{Namespace: ns, OperatorImage: "localhost/bosh-injector:test", ClusterDomain: "cluster.local", Runner: true,
			ConfigServer: runner.ConfigServer{Mode: director.ModeExternal, URL: srv.URL + "/api/", CAFile: srv.caFile, Directors: director.Directors{Default: directorName},
				UAA: runner.UAA{URL: srv.URL, ClientID: "director_to_credhub", ClientSecret: "director-to-credhub", ClientSecretKey: "secret", CAFile: srv.caFile}}})
		manifest, err := fixtures.ShopManifest()
		Expect(err).NotTo(HaveOccurred())
		_, err = fixtures.ApplyManifest(ctx, cp.Client, ns, manifest)
		Expect(err).NotTo(HaveOccurred())
		job := gatheringJob(ns, "")

		gather := job.Spec.Template.Spec.Containers[0]
		Expect(gather.Args).To(ContainElements("--config-server-url="+srv.URL+"/api/", "--director-name="+directorName,
			"--uaa-url="+srv.URL, "--uaa-client-id=director_to_credhub", "--uaa-client-secret-file=/var/run/secrets/kubernetes.io/serviceaccount/uaa-client-secret"))
		Expect(gather.Env).To(ContainElement(corev1.EnvVar{Name: "BOSH_INJECTOR_UAA_CA", Value: string(srv.serving.CAPEM)}))
		for _, a := range gather.Args {
			Expect(a).NotTo(ContainSubstring("uaa-client-secret-value"))
		}
		projected := projections(job)
		Expect(projected).To(ContainElement(HaveField("Secret", HaveValue(HaveField("Name", "shop.config-server-client")))))
		for _, p := range projected {
			Expect(p.ServiceAccountToken == nil || p.ServiceAccountToken.Audience != director.Audience).To(BeTrue(), "no token for the embedded server")
		}
		var copied corev1.Secret
		Expect(cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "shop.config-server-client"}, &copied)).To(Succeed())
		Expect(copied.OwnerReferences).To(ConsistOf(HaveField("Name", fixtures.ManifestSecret)))

		// The gathering as its pod runs it: the client secret read from
		// the copy, a token from the UAA.
		c := srv.clientOf("director_to_credhub", string(copied.Data["uaa-client-secret"]))
		res, err := gathering.Run(ctx, cp.Client, gathering.Config{Namespace: ns, ManifestSecret: fixtures.ManifestSecret, JobsDir: jobsDir, ClusterDomain: "cluster.local",
			Plan: jobPlan(job), ConfigServer: &gathering.ConfigServer{Client: c, Director: directorName, Deployment: "shop"}},
			gathering.NewRenderBPM(ctx, ruby.Renderer{}), time.Now())
		Expect(err).NotTo(HaveOccurred())
		Expect(res.VariableSet).NotTo(BeNil())
	})
})

var _ = Describe("a namespace whose deployments a director of another name deployed", func() {
	const ns = "runner-my-bosh"

	It("names their variables under that director, so the credentials it generated render unchanged", func() {
		directors := director.Directors{Default: "bosh-injector", ByNamespace: map[string]string{ns: "my-bosh"}}
		srv := startServer(ns, directors, map[string]string{"admin": "admin-secret"})
		// What director my-bosh left in its CredHub, brought over with
		// `credhub export` and `credhub import`.
		admin := srv.clientOf("admin", "admin-secret")
		_, err := admin.Set(ctx, "/my-bosh/shop/db_password", "password", "generated-by-my-bosh")
		Expect(err).NotTo(HaveOccurred())
		// A certificate my-bosh generated long ago: its expiry is read from
		// the server.
		certPEM, keyPEM := shortLivedCertificate()
		_, err = admin.Set(ctx, "/my-bosh/shop/bus_tls", "certificate",
			map[string]string{"ca": string(certPEM), "certificate": string(certPEM), "private_key": string(keyPEM)})
		Expect(err).NotTo(HaveOccurred())
		startOperatorWith(manager.Options{Namespace: ns, OperatorImage: "localhost/bosh-injector:test", ClusterDomain: "cluster.local", Runner: true,
			ConfigServer: runner.ConfigServer{Mode: director.ModeEmbedded, URL: srv.URL + "/api/", CAFile: srv.caFile, Directors: directors}})
		manifest, err := fixtures.ShopManifest()
		Expect(err).NotTo(HaveOccurred())
		_, err = fixtures.ApplyManifest(ctx, cp.Client, ns, manifest)
		Expect(err).NotTo(HaveOccurred())
		job := gatheringJob(ns, "")
		Expect(job.Spec.Template.Spec.Containers[0].Args).To(ContainElement("--director-name=my-bosh"))

		var sa corev1.ServiceAccount
		Eventually(func() (map[string]string, error) {
			err := cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "shop-gather"}, &sa)
			return sa.Annotations, err
		}).Should(HaveKeyWithValue(director.AnnotationDeployment, "shop"))
		token := srv.tokenClient(&sa)
		// The server scopes the Job's token to the namespace's director.
		_, err = token.Current(ctx, "/bosh-injector/shop/db_password")
		Expect(director.NotFound(err)).To(BeTrue(), "%v", err)
		res, err := gathering.Run(ctx, cp.Client, gathering.Config{Namespace: ns, ManifestSecret: fixtures.ManifestSecret, JobsDir: jobsDir, ClusterDomain: "cluster.local",
			Plan: jobPlan(job), ConfigServer: &gathering.ConfigServer{Client: token, Director: "my-bosh", Deployment: "shop"}},
			gathering.NewRenderBPM(ctx, ruby.Renderer{}), time.Now())
		Expect(err).NotTo(HaveOccurred())
		Expect(res.VariableSet).NotTo(BeNil())
		var set corev1.Secret
		Expect(cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "shop.variables.set-v1"}, &set)).To(Succeed())
		Expect(string(set.Data[names.VariableSetKey])).To(ContainSubstring(`"/my-bosh/shop/db_password"`))
		var db corev1.Secret
		Expect(cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "shop.ig-resolved.db-v1"}, &db)).To(Succeed())
		Expect(string(db.Data[resolved.Key])).To(ContainSubstring("generated-by-my-bosh"))

		complete(job, res.Report())
		warning := expiryWarning(ns)
		Expect(warning.Note).To(ContainSubstring("certificate variable '/my-bosh/shop/bus_tls' expires"))
		Expect(warning.Note).To(ContainSubstring("`credhub regenerate -n /my-bosh/shop/bus_tls`"))
		Expect(warning.Note).NotTo(Or(ContainSubstring("BEGIN"), ContainSubstring("generated-by-my-bosh")))
	})
})
