package gathering_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bosh-injector/bosh-injector/gather/gathering"
	"github.com/bosh-injector/bosh-injector/gather/gathering/secretdata"
	"github.com/bosh-injector/bosh-injector/gather/gathering/versions"
	"github.com/bosh-injector/bosh-injector/gather/model/bpm"
	"github.com/bosh-injector/bosh-injector/gather/model/deployment"
	"github.com/bosh-injector/bosh-injector/gather/model/instance"
	"github.com/bosh-injector/bosh-injector/gather/names"
	"github.com/bosh-injector/bosh-injector/gather/render/resolved"
	"github.com/bosh-injector/bosh-injector/gather/render/ruby"
	"github.com/bosh-injector/bosh-injector/test/fixtures"
)

var _ = Describe("gather", func() {
	var ns string
	var n int
	var manifest []byte

	BeforeEach(func() {
		n++
		ns = fmt.Sprintf("gather-%d", n)
		Expect(cp.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		var err error
		manifest, err = fixtures.ShopManifest()
		Expect(err).NotTo(HaveOccurred())
	})

	apply := func(data []byte) {
		GinkgoHelper()
		_, err := fixtures.ApplyManifest(ctx, cp.Client, ns, data)
		Expect(err).NotTo(HaveOccurred())
	}
	gather := func() (*gathering.Result, error) {
		return gatherAccepted(cp.Client, gathering.Config{
			Namespace: ns, ManifestSecret: "shop-manifest", JobsDir: jobsDir, ClusterDomain: "cluster.local",
		}, gathering.NewRenderBPM(ctx, ruby.Renderer{}))
	}
	secretNames := func(labels client.MatchingLabels) []string {
		GinkgoHelper()
		var list corev1.SecretList
		Expect(cp.Client.List(ctx, &list, client.InNamespace(ns), labels)).To(Succeed())
		var out []string
		for _, s := range list.Items {
			out = append(out, s.Name)
		}
		return out
	}
	// gatherBroken gathers the manifest once from the releases as they are,
	// then a changed manifest from a copy of them that break edits: it
	// returns that gathering's error, having checked it wrote no Secret.
	gatherBroken := func(breaks func(dir string)) error {
		GinkgoHelper()
		apply(manifest)
		_, err := gather()
		Expect(err).NotTo(HaveOccurred())
		before := secretNames(client.MatchingLabels{names.LabelDeployment: "shop"})

		broken := GinkgoT().TempDir()
		Expect(os.CopyFS(broken, os.DirFS(jobsDir))).To(Succeed())
		breaks(broken)
		apply([]byte(strings.Replace(string(manifest), "        session_secret: ((session_secret))", "        session_secret: ((session_secret))\n        workers: 9", 1)))
		_, err = gatherAccepted(cp.Client, gathering.Config{
			Namespace: ns, ManifestSecret: "shop-manifest", JobsDir: broken, ClusterDomain: "cluster.local",
		}, gathering.NewRenderBPM(ctx, ruby.Renderer{}))
		Expect(secretNames(client.MatchingLabels{names.LabelDeployment: "shop"})).To(ConsistOf(before))
		return err
	}
	bpmInfo := func(name string) bpm.Info {
		GinkgoHelper()
		var s corev1.Secret
		Expect(cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &s)).To(Succeed())
		var info bpm.Info
		Expect(secretdata.Decode(s.Data[bpm.InfoKey], &info)).To(Succeed())
		return info
	}

	It("writes the versioned Secrets, variables and Services, and nothing more on a second run", func() {
		apply(manifest)
		res, err := gather()
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Groups).To(HaveLen(4))

		Expect(secretNames(client.MatchingLabels{names.LabelSecretKind: names.KindBPM})).To(ConsistOf(
			"shop.bpm.bus-v1", "shop.bpm.db-v1", "shop.bpm.web-v1", "shop.bpm.smoke-tests-v1"))
		Expect(secretNames(client.MatchingLabels{names.LabelSecretKind: names.KindResolved})).To(ConsistOf(
			"shop.ig-resolved.bus-v1", "shop.ig-resolved.db-v1", "shop.ig-resolved.web-v1", "shop.ig-resolved.smoke-tests-v1"))
		Expect(secretNames(client.MatchingLabels{names.LabelManagedBy: names.ManagedBy})).To(ContainElements(
			"shop.var-bus-password", "shop.var-db-password"))

		db := bpmInfo("shop.bpm.db-v1")
		Expect(db.ResolvedSecret).To(Equal("shop.ig-resolved.db-v1"))
		Expect(db.PersistentDiskMB).To(Equal(1024))
		Expect(db.Releases).To(Equal([]bpm.Release{{Name: "store", Version: "1.0.0", Image: "localhost/bosh-injector-fixtures/store:ubuntu-noble-1.0-1.0.0"}}))
		Expect(db.Jobs).To(ConsistOf(HaveField("Scripts", ContainElement("pre-start"))))
		// A job with a pre-start script records its packages, which a
		// pre-start container of another release's image mounts.
		Expect(db.Jobs[0].Packages).To(Equal([]string{"pgstore"}))
		smoke := bpmInfo("shop.bpm.smoke-tests-v1")
		Expect(smoke.Lifecycle).To(Equal("errand"))
		Expect(smoke.Jobs[0].Scripts).To(ContainElement("run"))

		web := bpmInfo("shop.bpm.web-v1")
		Expect(web.Instances).To(Equal(2))
		Expect(web.AZs).To(Equal([]string{"z1", "z2"}))
		Expect(web.BPM).To(HaveLen(1))
		Expect(web.BPM[0].Indexes).To(Equal([]int{0, 1}))
		proc := web.BPM[0].Jobs["storefront"].Processes[0]
		Expect(proc.Executable).To(Equal("/var/vcap/packages/storefront/bin/storefront"))
		Expect(*proc.Limits.Memory).To(Equal("256M"))
		Expect(proc.Env).To(HaveKeyWithValue("HOME", "/var/vcap/data/storefront"))
		// web-check's monit checks no process: an errand job, which the
		// instance does not start.
		Expect(web.Jobs).To(Equal([]bpm.Job{{Name: "storefront", Release: "shop"}, {Name: "web-check", Release: "shop", Scripts: []string{"run"}}}))
		Expect(web.BPM[0].Idle).To(Equal([]string{"web-check"}))

		var rs corev1.Secret
		Expect(cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "shop.ig-resolved.web-v1"}, &rs)).To(Succeed())
		var group resolved.Group
		Expect(secretdata.Decode(rs.Data[resolved.Key], &group)).To(Succeed())
		Expect(group.Jobs).To(HaveLen(2))
		Expect(group.Jobs[0].Links.Keys()).To(ContainElement("database"))
		// Variables are interpolated into the resolved properties.
		var password corev1.Secret
		Expect(cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "shop.var-db-password"}, &password)).To(Succeed())
		Expect(string(rs.Data[resolved.Key])).To(ContainSubstring(string(password.Data["password"])))

		var svcs corev1.ServiceList
		Expect(cp.Client.List(ctx, &svcs, client.InNamespace(ns))).To(Succeed())
		var svcNames []string
		for _, s := range svcs.Items {
			svcNames = append(svcNames, s.Name)
		}
		Expect(svcNames).To(ConsistOf("shop-bus", "shop-bus-0", "shop-bus-1", "shop-bus-2", "shop-db", "shop-db-0",
			"shop-web", "shop-web-0", "shop-web-1", "shop-smoke-tests", "shop-smoke-tests-0",
			// link().address(status: healthy), and per AZ of the groups in two.
			"shop-bus-healthy", "shop-db-healthy", "shop-web-healthy", "shop-smoke-tests-healthy",
			"shop-bus-az-z1", "shop-bus-az-z1-healthy", "shop-bus-az-z2", "shop-bus-az-z2-healthy",
			"shop-web-az-z1", "shop-web-az-z1-healthy", "shop-web-az-z2", "shop-web-az-z2-healthy"))

		// The DNS records, in the deployment's zone.
		Expect(res.DNS).To(Equal("shop.dns-v1"))
		var records corev1.ConfigMap
		Expect(cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "shop.dns-v1"}, &records)).To(Succeed())
		Expect(records.Data).To(HaveKeyWithValue(names.DNSZoneKey, "shop."+ns+".bosh-injector.internal"))
		Expect(records.Data[names.DNSRecordsKey]).To(ContainSubstring("q-s0.bus.default.shop.bosh\tIN\tCNAME\tshop-bus." + ns + ".svc.cluster.local.\n"))

		counted, writes := countingClient()
		again, err := gatherAccepted(counted, gathering.Config{
			Namespace: ns, ManifestSecret: "shop-manifest", JobsDir: jobsDir, ClusterDomain: "cluster.local",
		}, gathering.NewRenderBPM(ctx, ruby.Renderer{}))
		Expect(err).NotTo(HaveOccurred())
		Expect(writes.Load()).To(BeZero(), "API writes re-gathering an unchanged deployment")
		for _, g := range again.Groups {
			Expect(g.Resolved.Created || g.BPM.Created).To(BeFalse(), g.InstanceGroup)
		}
		Expect(again.Services.Created).To(BeEmpty())
		Expect(again.DNS).To(Equal("shop.dns-v1"))
	})

	// dnsJobs are the fixture releases with the dns release, whose
	// bosh-dns-aliases job declares aliases.
	dnsJobs := func() string {
		GinkgoHelper()
		dir := GinkgoT().TempDir()
		Expect(os.CopyFS(dir, os.DirFS(jobsDir))).To(Succeed())
		Expect(fixtures.LayoutJobs(fixtures.ReleaseDir("dns"), filepath.Join(dir, "dns"))).To(Succeed())
		return dir
	}
	// withAliases adds to manifest m the dns release and a bosh-dns-aliases
	// addon declaring aliases (list entries at the property's indentation).
	withAliases := func(m, aliases string) string {
		return strings.Replace(m, "releases:\n", "releases:\n- {name: dns, version: \"1.0.0\", url: localhost/bosh-injector-fixtures}\n", 1) + `
addons:
- name: bosh-dns-aliases
  jobs:
  - name: bosh-dns-aliases
    release: dns
    properties:
      aliases:
` + aliases
	}
	// gatherReport applies data as the manifest of a second deployment,
	// "report", and gathers it from the releases in dir.
	gatherReport := func(data, dir string, progress gathering.Progress) (*gathering.Result, error) {
		GinkgoHelper()
		data = strings.Replace(data, "\nname: shop\n", "\nname: report\n", 1)
		_, err := fixtures.Apply(ctx, cp.Client, ns, "report", "report-manifest", []byte(data))
		Expect(err).NotTo(HaveOccurred())
		return gatherAccepted(cp.Client, gathering.Config{Namespace: ns, ManifestSecret: "report-manifest", JobsDir: dir, ClusterDomain: "cluster.local", Progress: progress},
			gathering.NewRenderBPM(ctx, ruby.Renderer{}))
	}
	records := func(name string) string {
		GinkgoHelper()
		var cm corev1.ConfigMap
		Expect(cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &cm)).To(Succeed())
		return cm.Data[names.DNSRecordsKey]
	}

	It("resolves a link and DNS aliases of another deployment of the namespace, and fails as the director does once the link is not shared", func() {
		// The shop shares its database; a second deployment consumes it
		// and aliases the shop's bus and db.
		shared := strings.Replace(string(manifest), "  - name: pgstore\n    release: store\n", "  - name: pgstore\n    release: store\n    provides: {database: {shared: true}}\n", 1)
		apply([]byte(shared))
		res, err := gather()
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Shared).To(ConsistOf(HaveField("Name", "shop.link.database-v1")))

		report := withAliases(strings.Replace(string(manifest), "        session_secret: ((session_secret))\n", "        session_secret: ((session_secret))\n    consumes: {database: {from: database, deployment: shop}}\n", 1), `
      - domain: bus.shop.internal
        targets:
        - {query: "*", instance_group: bus, deployment: shop, network: default, domain: bosh}
      - domain: _.bus.shop.internal
        targets:
        - {query: _, instance_group: bus, deployment: shop, network: default}
      - domain: db.shop.internal
        targets:
        - {query: "*", instance_group: db, deployment: shop, network: private}
`)
		dir := dnsJobs()
		type event struct{ Type, Reason, Message string }
		var events []event
		rres, err := gatherReport(report, dir, func(_ *corev1.Secret, eventType, reason, message string) {
			events = append(events, event{eventType, reason, message})
		})
		Expect(err).NotTo(HaveOccurred())
		var rs corev1.Secret
		Expect(cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "report.ig-resolved.web-v1"}, &rs)).To(Succeed())
		var group resolved.Group
		Expect(secretdata.Decode(rs.Data[resolved.Key], &group)).To(Succeed())
		db, _ := group.Jobs[0].Links.Get("database")
		Expect(db).To(HaveField("Keys()", ContainElement("instances")))
		Expect(string(rs.Data[resolved.Key])).To(ContainSubstring(`"address":"shop-db.` + ns + `.svc.cluster.local"`))

		// The aliases name the shop's Services; the network no pod has is
		// answered as the pods' one, with a warning.
		svc := "." + ns + ".svc.cluster.local.\n"
		Expect(records(rres.DNS)).To(And(
			ContainSubstring("bus.shop.internal\tIN\tCNAME\tshop-bus"+svc),
			ContainSubstring(instance.ID("shop", "bus", 2)+".bus.shop.internal\tIN\tCNAME\tshop-bus-2"+svc),
			ContainSubstring("db.shop.internal\tIN\tCNAME\tshop-db"+svc)))
		Expect(events).To(ContainElement(event{corev1.EventTypeWarning, gathering.ReasonAliasField,
			"job 'bosh-dns-aliases', alias 'db.shop.internal', target instance group 'db' of deployment 'shop': field 'network' ('private') is not honoured: instances have the one network 'default', whose addresses answer the alias"}))
		Expect(events).NotTo(ContainElement(HaveField("Message", ContainSubstring("bus.shop.internal"))))

		By("the shop no longer sharing its database")
		apply(manifest)
		res, err = gather()
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Shared).To(BeEmpty())
		Expect(res.Links).To(BeEmpty())
		Expect(secretNames(client.MatchingLabels{names.LabelSecretKind: names.KindLink})).To(BeEmpty())
		_, err = gatherReport(report, dir, nil)
		Expect(err).To(MatchError(ContainSubstring("Failed to resolve link 'database' with type 'pgsql' from job 'storefront' in instance group 'web'. Details below:\n    - No link providers found")))
	})

	It("fails an alias to a group another deployment no longer has, naming the alias", func() {
		apply(manifest)
		_, err := gather()
		Expect(err).NotTo(HaveOccurred())
		report := withAliases(string(manifest), `
      - domain: smoke.shop.internal
        targets:
        - {query: "*", instance_group: smoke-tests, deployment: shop, network: default}
`)
		dir := dnsJobs()
		res, err := gatherReport(report, dir, nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(records(res.DNS)).To(ContainSubstring("smoke.shop.internal\tIN\tCNAME\tshop-smoke-tests." + ns + ".svc.cluster.local.\n"))

		// The group leaves the shop: its Services go, its BPM info stays.
		i := strings.Index(string(manifest), "\n- name: smoke-tests\n")
		j := strings.Index(string(manifest), "\nvariables:\n")
		apply([]byte(string(manifest)[:i] + string(manifest)[j:]))
		shop, err := gather()
		Expect(err).NotTo(HaveOccurred())
		Expect(shop.Services.Deleted).To(ContainElement("shop-smoke-tests"))
		Expect(secretNames(client.MatchingLabels{names.LabelSecretKind: names.KindBPM})).To(ContainElement("shop.bpm.smoke-tests-v1"))

		_, err = gatherReport(report, dir, nil)
		Expect(err).To(MatchError("Failed to resolve DNS aliases of deployment 'report':\n  - Alias 'smoke.shop.internal': instance group 'smoke-tests' does not exist in deployment 'shop' of namespace " + ns + " (as that deployment was last gathered)"))
	})

	It("keeps a Service for an alias over two groups, labels their BPM info for the webhook, and prunes both when the alias goes", func() {
		dir := dnsJobs()
		run := func() *gathering.Result {
			GinkgoHelper()
			res, err := gatherAccepted(cp.Client, gathering.Config{Namespace: ns, ManifestSecret: "shop-manifest", JobsDir: dir, ClusterDomain: "cluster.local"},
				gathering.NewRenderBPM(ctx, ruby.Renderer{}))
			Expect(err).NotTo(HaveOccurred())
			return res
		}
		aliased := withAliases(string(manifest), `      - domain: store.service.shop.internal
        targets:
        - {query: "*", instance_group: db, deployment: shop, network: default, domain: bosh}
        - {query: "*", instance_group: web, deployment: shop, network: default, domain: bosh}
`)
		apply([]byte(aliased))
		res := run()
		const service, label = "shop-alias-72c53d0f86", "alias.bosh-injector.io/72c53d0f86"
		Expect(res.Services.Created).To(ContainElement(service))
		var svc corev1.Service
		Expect(cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: service}, &svc)).To(Succeed())
		Expect(svc.Spec.ClusterIP).To(Equal(corev1.ClusterIPNone))
		Expect(svc.Spec.PublishNotReadyAddresses).To(BeTrue())
		Expect(svc.Spec.Selector).To(Equal(map[string]string{names.LabelDeployment: "shop", label: "true"}))
		Expect(svc.Labels).To(Equal(map[string]string{names.LabelDeployment: "shop", names.LabelManagedBy: names.ManagedBy}))
		Expect(svc.Annotations).To(HaveKeyWithValue(names.AnnotationAlias, "store.service.shop.internal"))
		Expect(svc.OwnerReferences).To(ConsistOf(HaveField("Name", "shop-manifest")))
		for _, g := range []string{"db", "web"} {
			Expect(bpmInfo("shop.bpm."+g+"-v1").AliasLabels).To(Equal([]string{label}), g)
		}
		Expect(bpmInfo("shop.bpm.bus-v1").AliasLabels).To(BeEmpty())
		var records corev1.ConfigMap
		Expect(cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: res.DNS}, &records)).To(Succeed())
		Expect(records.Data[names.DNSRecordsKey]).To(ContainSubstring("store.service.shop.internal\tIN\tCNAME\t" + service + "." + ns + ".svc.cluster.local.\n"))

		// The alias gone, its Service and labels go with it.
		apply([]byte(strings.Replace(aliased, "        - {query: \"*\", instance_group: web, deployment: shop, network: default, domain: bosh}\n", "", 1)))
		res = run()
		Expect(res.Services.Deleted).To(ConsistOf(service))
		Expect(bpmInfo("shop.bpm.db-v2").AliasLabels).To(BeEmpty())
	})

	It("warns on the manifest Secret of BPM settings pods honour only in part", func() {
		// The storefront job with a volume BPM mounts noexec, which a
		// Kubernetes mount cannot be, and asking for the persistent disk
		// in web, which has none: its store is the pod's own.
		dir := GinkgoT().TempDir()
		Expect(os.CopyFS(dir, os.DirFS(jobsDir))).To(Succeed())
		tmpl := filepath.Join(dir, "shop", "storefront", "templates", "bpm.yml.erb")
		data, err := os.ReadFile(tmpl)
		Expect(err).NotTo(HaveOccurred())
		Expect(os.WriteFile(tmpl, append(data, "  persistent_disk: true\n  additional_volumes:\n  - path: /var/vcap/data/storefront/cache\n    writable: true\n"...), 0o644)).To(Succeed())
		apply([]byte(strings.Replace(string(manifest), "- name: web\n", "- name: web\n  vm_resources: {cpu: 1, ram: 512, ephemeral_disk_size: 2048}\n", 1)))
		type event struct{ Type, Reason, Message string }
		var events []event
		_, err = gatherAccepted(cp.Client, gathering.Config{
			Namespace: ns, ManifestSecret: "shop-manifest", JobsDir: dir, ClusterDomain: "cluster.local",
			Progress: func(_ *corev1.Secret, eventType, reason, message string) {
				events = append(events, event{eventType, reason, message})
			},
		}, gathering.NewRenderBPM(ctx, ruby.Renderer{}))
		Expect(err).NotTo(HaveOccurred())
		Expect(events).To(ContainElement(event{corev1.EventTypeWarning, gathering.ReasonBPMField,
			"instance group 'web': job 'storefront', process 'storefront', volume /var/vcap/data/storefront/cache: " + bpm.WarnExecutableMount}))
		Expect(events).To(ContainElement(event{corev1.EventTypeWarning, gathering.ReasonBPMField,
			"instance group 'web': job 'storefront' stores data in /var/vcap/store: " + bpm.WarnEphemeralStore}))
		Expect(bpmInfo("shop.bpm.web-v1")).To(And(HaveField("EphemeralStore", BeTrue()), HaveField("EphemeralDiskMB", 2048)))
		// db's store is its disk.
		Expect(bpmInfo("shop.bpm.db-v1").EphemeralStore).To(BeFalse())
		Expect(events).To(ContainElement(HaveField("Reason", gathering.StageRendered)))
	})

	It("writes a new version only for the group whose content changed", func() {
		apply(manifest)
		_, err := gather()
		Expect(err).NotTo(HaveOccurred())
		apply([]byte(strings.Replace(string(manifest), "        session_secret: ((session_secret))", "        session_secret: ((session_secret))\n        workers: 7", 1)))
		res, err := gather()
		Expect(err).NotTo(HaveOccurred())
		for _, g := range res.Groups {
			Expect(g.Resolved.Created).To(Equal(g.InstanceGroup == "web"), g.InstanceGroup)
		}
		Expect(secretNames(client.MatchingLabels{names.LabelSecretKind: names.KindBPM})).To(ContainElement("shop.bpm.web-v2"))
		Expect(bpmInfo("shop.bpm.web-v2").BPM[0].Jobs["storefront"].Processes[0].Env).To(HaveKeyWithValue("STOREFRONT_WORKERS", "7"))
	})

	It("renders again only the groups whose bpm.yml templates or specs changed, whatever input changed them", func() {
		// Every change below is of one input kind; the BPM of the groups
		// it does not reach comes from the stored version, without Ruby.
		var rendered []string
		gatherFrom := func(dir, build string) {
			GinkgoHelper()
			rendered = nil
			render := gathering.NewRenderBPM(ctx, ruby.Renderer{})
			_, err := gatherAccepted(cp.Client, gathering.Config{Namespace: ns, ManifestSecret: "shop-manifest", JobsDir: dir, ClusterDomain: "cluster.local", Build: build},
				func(d *deployment.Deployment) ([][]bpm.InstanceBPM, error) {
					for _, g := range d.Groups {
						rendered = append(rendered, g.Manifest.Name)
					}
					return render(d)
				})
			Expect(err).NotTo(HaveOccurred())
		}
		storefront := func() bpm.Process {
			GinkgoHelper()
			stored, err := versions.List(ctx, cp.Client, versions.Key{Namespace: ns, Deployment: "shop", Kind: names.KindBPM, InstanceGroup: "web"})
			Expect(err).NotTo(HaveOccurred())
			return bpmInfo(versions.Latest(stored).Secret.Name).BPM[0].Jobs["storefront"].Processes[0]
		}
		withWorkers := []byte(strings.Replace(string(manifest), "        session_secret: ((session_secret))", "        session_secret: ((session_secret))\n        workers: 7", 1))

		apply(manifest)
		gatherFrom(jobsDir, "")
		Expect(rendered).To(ConsistOf("bus", "db", "web", "smoke-tests"))
		gatherFrom(jobsDir, "")
		Expect(rendered).To(BeEmpty(), "nothing changed")

		By("the manifest")
		apply(withWorkers)
		gatherFrom(jobsDir, "")
		Expect(rendered).To(ConsistOf("web"))
		Expect(storefront().Env).To(HaveKeyWithValue("STOREFRONT_WORKERS", "7"))

		By("an ops file")
		_, err := fixtures.ApplyManifest(ctx, cp.Client, ns, withWorkers, deployment.OpsFile{Name: "workers.yml", Data: []byte(
			"- type: replace\n  path: /instance_groups/name=web/jobs/name=storefront/properties/storefront/workers\n  value: 8\n")})
		Expect(err).NotTo(HaveOccurred())
		gatherFrom(jobsDir, "")
		Expect(rendered).To(ConsistOf("web"))
		Expect(storefront().Env).To(HaveKeyWithValue("STOREFRONT_WORKERS", "8"))

		By("a variable's Secret")
		var secret corev1.Secret
		Expect(cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: names.VariableSecret("shop", "session_secret")}, &secret)).To(Succeed())
		secret.Data["password"] = []byte("rotated-by-the-user")
		Expect(cp.Client.Update(ctx, &secret)).To(Succeed())
		gatherFrom(jobsDir, "")
		Expect(rendered).To(ConsistOf("web"))

		By("a provider's link properties")
		apply([]byte(strings.Replace(string(withWorkers), "        databases:\n", "        port: 6543\n        databases:\n", 1)))
		gatherFrom(jobsDir, "")
		Expect(rendered).To(ConsistOf("db", "web"), "web consumes db's link")

		By("a release job's bpm.yml template, and its spec")
		changed := GinkgoT().TempDir()
		Expect(os.CopyFS(changed, os.DirFS(jobsDir))).To(Succeed())
		tmpl := filepath.Join(changed, "shop", "storefront", "templates", "bpm.yml.erb")
		data, err := os.ReadFile(tmpl)
		Expect(err).NotTo(HaveOccurred())
		Expect(os.WriteFile(tmpl, []byte(strings.Replace(string(data), "256M", "512M", 1)), 0o644)).To(Succeed())
		gatherFrom(changed, "")
		Expect(rendered).To(ConsistOf("web"))
		Expect(*storefront().Limits.Memory).To(Equal("512M"))
		spec := filepath.Join(changed, "shop", "smoke-tests", "job.MF")
		data, err = os.ReadFile(spec)
		Expect(err).NotTo(HaveOccurred())
		Expect(os.WriteFile(spec, append(data, "  smoke_tests.unused:\n    default: 1\n"...), 0o644)).To(Succeed())
		gatherFrom(changed, "")
		Expect(rendered).To(ConsistOf("smoke-tests"))

		By("the operator build")
		gatherFrom(changed, "v2")
		Expect(rendered).To(ConsistOf("bus", "db", "web", "smoke-tests"))
		gatherFrom(changed, "v2")
		Expect(rendered).To(BeEmpty())
	})

	It("writes nothing when a template of one group is broken, and names the template and line", func() {
		err := gatherBroken(func(broken string) {
			bpmTemplate := filepath.Join(broken, "shop", "storefront", "templates", "bpm.yml.erb")
			Expect(os.WriteFile(bpmTemplate, []byte("processes:\n- name: storefront\n  executable: <%= p('storefront.nope') %>\n"), 0o644)).To(Succeed())
		})
		Expect(err).To(MatchError(ContainSubstring(`- Unable to render jobs for instance group 'web'. Errors are:
  - Unable to render templates for job 'storefront'. Errors are:
    - Error filling in template 'bpm.yml.erb' (line 3: Can't find property '["storefront.nope"]')`)))
	})

	It("refuses a BPM volume glob a pod cannot mount, naming template, job, process and field, so the webhook never denies it", func() {
		err := gatherBroken(func(broken string) {
			bpmTemplate := filepath.Join(broken, "shop", "storefront", "templates", "bpm.yml.erb")
			Expect(os.WriteFile(bpmTemplate, []byte("processes:\n- name: storefront\n  executable: /bin/true\n  unsafe: {unrestricted_volumes: [{path: /srv/*/x}]}\n"), 0o644)).To(Succeed())
		})
		Expect(err).To(MatchError(ContainSubstring(`- Unable to render jobs for instance group 'web'. Errors are:
  - Unable to render templates for job 'storefront'. Errors are:
    - Invalid BPM configuration rendered from template 'bpm.yml.erb': job 'storefront', process 'storefront': unsafe.unrestricted_volumes path /srv/*/x is a glob over /srv/`)))
	})

	It("renders every template of every group before writing, and lists every failure as the director does", func() {
		prepend := func(path, text string) {
			GinkgoHelper()
			data, err := os.ReadFile(path)
			Expect(err).NotTo(HaveOccurred())
			Expect(os.WriteFile(path, append([]byte(text), data...), 0o644)).To(Succeed())
		}
		err := gatherBroken(func(broken string) {
			prepend(filepath.Join(broken, "shop", "storefront", "templates", "storefront.yml.erb"), "<% raise 'storefront is broken' %>\n")
			prepend(filepath.Join(broken, "bus", "bus", "templates", "bus.conf.erb"), "<%= p('bus.port' %>\n")
		})
		Expect(err).To(MatchError(And(
			ContainSubstring(`- Unable to render jobs for instance group 'web'. Errors are:
  - Unable to render templates for job 'storefront'. Errors are:
    - Error filling in template 'storefront.yml.erb' (line 1: storefront is broken)`),
			ContainSubstring(`- Unable to render jobs for instance group 'bus'. Errors are:
  - Unable to render templates for job 'bus'. Errors are:
    - Error filling in template 'bus.conf.erb' (line 1: `))))
		fmt.Fprintln(GinkgoWriter, err)
	})
})
