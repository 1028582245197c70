package trust_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/bosh-injector/bosh-injector/gather/bpm"
	"github.com/bosh-injector/bosh-injector/gather/names"
	"github.com/bosh-injector/bosh-injector/gather/secretdata"
	"github.com/bosh-injector/bosh-injector/gather/trust"
	"github.com/bosh-injector/bosh-injector/gather/versions"
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

	// Deleted and created again with the same content between the
	// gathering's write and the runner's accept: another object.
	var b corev1.Secret
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "shop.bpm.web-v1"}, &b); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	b.ResourceVersion, b.UID = "", "forged-uid"
	if err := c.Create(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	if g, refused := acceptReport(t, c, "job-1", w); len(g.Versions) != 0 || len(refused) != 1 || !strings.Contains(refused[0], "created again") {
		t.Fatalf("a re-created Secret was accepted: %+v, %q", g, refused)
	}

	// A report whose digest is not the Secrets' content.
	w = report(t, c, 1, 1)
	g := w["web"]
	g.SHA256 = strings.Repeat("0", 32)
	if got, refused := acceptReport(t, c, "job-2", trust.Written{"web": g}); len(got.Versions) != 0 || len(refused) != 1 || !strings.Contains(refused[0], "do not hold") {
		t.Fatalf("a report of other content was accepted: %+v, %q", got, refused)
	}

	// The report survives its termination message.
	parsed, err := trust.ParseReport(mustReport(t, trust.Report{Groups: w, Links: []string{"database"}}))
	if err != nil || parsed.Groups["web"] != w["web"] || !slices.Equal(parsed.Links, []string{"database"}) {
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
