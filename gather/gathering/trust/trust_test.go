package trust_test

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/bosh-injector/bosh-injector/gather/gathering/secretdata"
	"github.com/bosh-injector/bosh-injector/gather/gathering/trust"
	"github.com/bosh-injector/bosh-injector/gather/gathering/versions"
	"github.com/bosh-injector/bosh-injector/gather/model/bpm"
	"github.com/bosh-injector/bosh-injector/gather/names"
)

const ns, operator = "shop", "bosh-injector"

// write stores a version of the web group: resolved content and the BPM
// info naming it, as a gathering does.
func write(t *testing.T, c client.Client, resolvedContent string) {
	t.Helper()
	key := versions.Key{Namespace: ns, Deployment: "shop", InstanceGroup: "web", Kind: names.KindResolved}
	r, err := versions.Write(context.Background(), c, versions.Desired{Key: key, Data: map[string][]byte{"resolved.json": []byte(resolvedContent)}})
	if err != nil {
		t.Fatal(err)
	}
	data, err := secretdata.Encode(bpm.Info{Deployment: "shop", InstanceGroup: "web", ResolvedSecret: r.Name})
	if err != nil {
		t.Fatal(err)
	}
	key.Kind = names.KindBPM
	if _, err := versions.Write(context.Background(), c, versions.Desired{Key: key, Data: map[string][]byte{bpm.InfoKey: data}}); err != nil {
		t.Fatal(err)
	}
}

// report is what a gathering reports of web's BPM and resolved versions.
func report(t *testing.T, c client.Client, bpmVersion, resolvedVersion int) trust.Written {
	t.Helper()
	var b, r corev1.Secret
	for _, get := range []struct {
		s    *corev1.Secret
		name string
	}{{&b, fmt.Sprintf("shop.bpm.web-v%d", bpmVersion)}, {&r, fmt.Sprintf("shop.ig-resolved.web-v%d", resolvedVersion)}} {
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: get.name}, get.s); err != nil {
			t.Fatal(err)
		}
	}
	return trust.Written{"web": trust.WrittenOf(&b, &r)}
}

func acceptReport(t *testing.T, c client.Client, job types.UID, w trust.Written) (trust.Group, []string) {
	t.Helper()
	rec, refused, err := trust.Accept(context.Background(), c, operator, ns, "shop", job, w)
	if err != nil {
		t.Fatal(err)
	}
	return rec.Groups["web"], refused
}

func accept(t *testing.T, c client.Client, job types.UID, bpmVersion, resolvedVersion int) trust.Group {
	t.Helper()
	g, _ := acceptReport(t, c, job, report(t, c, bpmVersion, resolvedVersion))
	return g
}

func TestAcceptTakesWhatEachGatheringReportedOnce(t *testing.T) {
	c := fake.NewClientBuilder().Build()
	write(t, c, "1")
	g := accept(t, c, "job-1", 1, 1)
	if len(g.Versions) != 1 || g.Latest().Resolved.Name != "shop.ig-resolved.web-v1" || g.Latest().BPM.Name != "shop.bpm.web-v1" || g.Name != "web" {
		t.Fatalf("first gathering: %+v", g)
	}

	// A job's report is accepted once.
	write(t, c, "2")
	if g := accept(t, c, "job-1", 2, 2); len(g.Versions) != 1 {
		t.Fatalf("job-1 accepted twice: %+v", g)
	}
	// A newer BPM version forged while job-2 finished is not its report.
	forgedBPM := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shop.bpm.web-v3", Labels: map[string]string{
		names.LabelDeployment: "shop", names.LabelInstanceGroup: "web", names.LabelSecretKind: names.KindBPM, names.LabelVersion: "3"}}}
	if err := c.Create(context.Background(), forgedBPM); err != nil {
		t.Fatal(err)
	}
	g = accept(t, c, "job-2", 2, 2)
	if len(g.Versions) != 2 || g.Latest().Resolved.Version != 2 {
		t.Fatalf("second gathering: %+v", g)
	}
	if g.Latest().BPM.Name != "shop.bpm.web-v2" {
		t.Fatalf("accepted %s, not the reported version", g.Latest().BPM.Name)
	}
	// A report naming a BPM version that names another resolved Secret
	// accepts nothing.
	if g := accept(t, c, "job-3", 2, 1); len(g.Versions) != 2 {
		t.Fatalf("an inconsistent report was accepted: %+v", g)
	}
	if p := g.Pinned(1); p == nil || p.BPM.Name != "shop.bpm.web-v1" {
		t.Fatalf("pinned to 1: %+v", p)
	}
	if g.Pinned(9) != nil {
		t.Fatal("a version never accepted is pinned")
	}

	// A recorded Secret replaced by other content leaves the record.
	old := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shop.ig-resolved.web-v1"}}
	if err := c.Delete(context.Background(), old); err != nil {
		t.Fatal(err)
	}
	forged := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: old.Name, Labels: map[string]string{
		names.LabelDeployment: "shop", names.LabelInstanceGroup: "web", names.LabelSecretKind: names.KindResolved, names.LabelVersion: "1"}},
		Data: map[string][]byte{"resolved.json": []byte("forged")}}
	if err := c.Create(context.Background(), forged); err != nil {
		t.Fatal(err)
	}
	if g := accept(t, c, "job-3", 2, 2); len(g.Versions) != 1 || g.Latest().Resolved.Version != 2 {
		t.Fatalf("after replacing v1: %+v", g)
	}
}

func TestAcceptRefusesSecretsOtherThanReported(t *testing.T) {
	c := fake.NewClientBuilder().Build()
	write(t, c, "1")
	w := report(t, c, 1, 1)

	// Deleted and created again between the gathering's write and the
	// runner's accept, with other content, or mutable: refused. With the
	// same content, immutable, it is as good as the one written.
	var b corev1.Secret
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "shop.bpm.web-v1"}, &b); err != nil {
		t.Fatal(err)
	}
	orig := b.DeepCopy()
	recreate := func(change func(*corev1.Secret)) {
		t.Helper()
		if err := c.Delete(context.Background(), &b); err != nil {
			t.Fatal(err)
		}
		b = *orig.DeepCopy()
		b.ResourceVersion, b.UID = "", "forged-uid"
		change(&b)
		if err := c.Create(context.Background(), &b); err != nil {
			t.Fatal(err)
		}
	}
	recreate(func(s *corev1.Secret) {
		s.Data = map[string][]byte{bpm.InfoKey: []byte(strings.Replace(string(s.Data[bpm.InfoKey]), "web", "wep", 1))}
	})
	if g, refused := acceptReport(t, c, "job-1", w); len(g.Versions) != 0 || len(refused) != 1 || !strings.Contains(refused[0], "created again") {
		t.Fatalf("a re-created Secret of other content was accepted: %+v, %q", g, refused)
	}
	recreate(func(s *corev1.Secret) { s.Immutable = nil })
	if g, refused := acceptReport(t, c, "job-1b", w); len(g.Versions) != 0 || len(refused) != 1 || !strings.Contains(refused[0], "not immutable") {
		t.Fatalf("a mutable Secret was accepted: %+v, %q", g, refused)
	}
	recreate(func(*corev1.Secret) {})
	if g, refused := acceptReport(t, c, "job-1c", w); len(g.Versions) != 1 || len(refused) != 0 || g.Versions[0].BPM.UID != "forged-uid" {
		t.Fatalf("the same content, created again: %+v, %q", g, refused)
	}

	// A report whose digest is not the Secrets' content: refused, the
	// version accepted before stays.
	w = report(t, c, 1, 1)
	g := w["web"]
	g.SHA256 = strings.Repeat("0", 32)
	if got, refused := acceptReport(t, c, "job-2", trust.Written{"web": g}); len(got.Versions) != 1 || len(refused) != 1 || !strings.Contains(refused[0], "do not hold") {
		t.Fatalf("a report of other content was accepted: %+v, %q", got, refused)
	}

	// The report survives its termination message.
	links := map[string]trust.WrittenLink{"database": {Version: 2, SHA256: "0123"}}
	parsed, err := trust.ParseReport(mustReport(t, trust.Report{Groups: w, Links: links}))
	if err != nil || parsed.Groups["web"] != w["web"] || !maps.Equal(parsed.Links, links) {
		t.Fatalf("report read back as %+v (%v), written %+v", parsed, err, w)
	}
	if g, refused := acceptReport(t, c, "job-3", parsed.Groups); len(g.Versions) != 1 || len(refused) != 0 {
		t.Fatalf("the report itself: %+v, %q", g, refused)
	}
}

func mustReport(t *testing.T, r trust.Report) string {
	t.Helper()
	s, err := r.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestAcceptLinks records the links a gathering reported as shared, in
// place of those recorded before, and refuses a link Secret that is not the
// reported one.
func TestAcceptLinks(t *testing.T) {
	c := fake.NewClientBuilder().Build()
	write(t, c, `{"a":1}`)
	accept(t, c, "job-1", 1, 1)
	link := func(v int, data string) *corev1.Secret {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("shop.link.database-v%d", v), Namespace: ns, UID: types.UID(fmt.Sprintf("uid-%d", v)),
			Labels: map[string]string{names.LabelDeployment: "shop", names.LabelSecretKind: names.KindLink, names.LabelInstanceGroup: "database", names.LabelVersion: fmt.Sprint(v)}},
			Immutable: new(true), Data: map[string][]byte{names.LinkKey: []byte(data)}}
		if err := c.Create(context.Background(), s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	recorded := func() map[string]trust.Ref {
		t.Helper()
		rec, err := trust.Read(context.Background(), c, operator, ns, "shop")
		if err != nil {
			t.Fatal(err)
		}
		return rec.Links
	}
	v1 := link(1, `{"name":"database"}`)
	shared := func(job types.UID, l trust.WrittenLink) ([]string, error) {
		_, _, refused, err := trust.AcceptReport(context.Background(), c, operator, ns, "shop", job, "", trust.Report{Groups: trust.Written{}, Links: map[string]trust.WrittenLink{"database": l}})
		return refused, err
	}
	refused, err := shared("links-1", trust.WrittenLinkOf(v1))
	if err != nil || len(refused) != 0 || recorded()["database"].Name != v1.Name {
		t.Fatalf("link v1: refused %q (%v), recorded %+v", refused, err, recorded())
	}
	// A report whose digest is not the Secret's content is refused; the
	// link is then recorded as not shared.
	link(2, `{"name":"database","forged":true}`)
	w := trust.WrittenLinkOf(v1)
	w.Version = 2
	if refused, err := shared("links-2", w); err != nil || len(refused) != 1 || !strings.Contains(refused[0], "not the one the gathering wrote") {
		t.Fatalf("a link of other content: refused %q (%v)", refused, err)
	}
	if got := recorded(); len(got) != 0 {
		t.Fatalf("recorded %+v", got)
	}
	// Accept alone, and a report without groups (a Job that reported
	// nothing), keep the links recorded.
	if _, err := shared("links-3", trust.WrittenLinkOf(v1)); err != nil {
		t.Fatal(err)
	}
	accept(t, c, "job-2", 1, 1)
	if recorded()["database"].Name != v1.Name {
		t.Fatalf("Accept lost the links: %+v", recorded())
	}
	if _, _, _, err := trust.AcceptReport(context.Background(), c, operator, ns, "shop", "job-3", "", trust.Report{}); err != nil {
		t.Fatal(err)
	}
	if recorded()["database"].Name != v1.Name {
		t.Fatalf("a report without groups lost the links: %+v", recorded())
	}
}

// The chart's owner ConfigMap owns every record, so uninstalling the chart
// leaves none behind; without it (the operator run by hand) they are left
// unowned.
func TestRecordsAreOwnedByTheChartsConfigMap(t *testing.T) {
	ctx := context.Background()
	owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: operator, Name: trust.OwnerName, UID: "owner-uid"}}
	for _, c := range []struct {
		name string
		objs []client.Object
		want []metav1.OwnerReference
	}{
		{"chart", []client.Object{owner}, []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: trust.OwnerName, UID: "owner-uid"}}},
		{"no chart", nil, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			cl := fake.NewClientBuilder().WithObjects(c.objs...).Build()
			if err := trust.RecordJob(ctx, cl, operator, ns, "shop", "shop-gather-1", "uid-1"); err != nil {
				t.Fatal(err)
			}
			var cm corev1.ConfigMap
			if err := cl.Get(ctx, client.ObjectKey{Namespace: operator, Name: trust.Name(ns, "shop")}, &cm); err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(cm.OwnerReferences) != fmt.Sprint(c.want) {
				t.Errorf("owner references %v, want %v", cm.OwnerReferences, c.want)
			}
		})
	}
}
