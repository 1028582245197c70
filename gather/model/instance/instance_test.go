package instance

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/bosh-injector/bosh-injector/gather/model/yamlvalue"
)

func TestIndex(t *testing.T) {
	tests := []struct{ ordinal, azIndex, azCount, want int }{
		{0, 1, 1, 0}, {3, 1, 1, 3}, {0, 2, 2, 1}, {1, 1, 2, 2}, {1, 2, 2, 3}, {2, 3, 3, 8}, {0, 1, 0, 0},
	}
	for _, tc := range tests {
		if got := Index(tc.ordinal, tc.azIndex, tc.azCount); got != tc.want {
			t.Errorf("Index(%d,%d,%d) = %d, want %d", tc.ordinal, tc.azIndex, tc.azCount, got, tc.want)
		}
	}
}

func TestInstancesAgreeWithIndex(t *testing.T) {
	n := Network{Namespace: "ns", ClusterDomain: "cluster.local"}
	insts, err := n.Instances("dep", "web", []string{"z1", "z2"}, 5)
	if err != nil {
		t.Fatal(err)
	}
	for _, inst := range insts {
		if Index(inst.Ordinal, inst.AZIndex, 2) != inst.Index {
			t.Errorf("%+v does not match Index", inst)
		}
		if inst.Bootstrap != (inst.Index == 0) {
			t.Errorf("bootstrap of %d", inst.Index)
		}
	}
	if insts[3].AZ != "z2" || insts[4].AZ != "z1" || insts[4].Ordinal != 2 {
		t.Errorf("AZ assignment: %+v", insts)
	}
	if insts[1].Address != "dep-web-1.ns.svc.cluster.local" || insts[1].Service != "dep-web-1" {
		t.Errorf("address %s", insts[1].Address)
	}
	if insts[0].ID != ID("dep", "web", 0) || insts[0].ID == insts[1].ID || insts[0].ID == ID("dep", "web2", 0) {
		t.Error("ids not stable or not distinct")
	}
	if len(insts[0].ID) != 36 || insts[0].ID[14] != '5' {
		t.Errorf("not a v5 UUID: %s", insts[0].ID)
	}
}

func TestServiceNames(t *testing.T) {
	long := strings.Repeat("a", 60) + "-instance" // 70 characters with "-<ig>"
	tests := []struct {
		name, deployment, group string
		index                   int
		want                    string
	}{
		{"plain", "dep", "web", 0, "dep-web-0"},
		{"underscore and dots", "My_Dep", "web.z1_a", 2, "my-dep-webz1-a-2"},
		{"70 characters", long, "ig", 0, strings.Repeat("a", 31) + "a5ccc2d04e3ad1b1c2cf4dfb4b1e3e3c"},
	}
	for _, tc := range tests {
		got := ServiceName(tc.deployment, tc.group, tc.index)
		if tc.name == "70 characters" {
			if len(tc.deployment+"-"+tc.group+"-0") < 70 || len(got) != 63 || !strings.HasPrefix(got, strings.Repeat("a", 31)) {
				t.Errorf("%s: %s (%d)", tc.name, got, len(got))
			}
			if got == ServiceName(tc.deployment, tc.group, 1) {
				t.Errorf("%s: indexes collide", tc.name)
			}
			continue
		}
		if got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
	if GroupServiceName("My_Dep", "web.z1_a") != "my-dep-webz1-a" {
		t.Error(GroupServiceName("My_Dep", "web.z1_a"))
	}
}

func TestAddressLimits(t *testing.T) {
	// A namespace and domain leaving 40 characters: a 50-character Service
	// name is hashed down to fit.
	domain := strings.Repeat("d", 253-40-len(".ns.svc."))
	n := Network{Namespace: "ns", ClusterDomain: domain}
	svc, addr, err := n.Address(strings.Repeat("s", 50))
	if err != nil {
		t.Fatal(err)
	}
	if len(addr) != 253 || len(svc) != 40 || !strings.HasPrefix(svc, "ssssssss") {
		t.Errorf("%s (%d) %s", svc, len(addr), addr)
	}
	// Leaving 20 characters, even the hash cannot fit.
	n.ClusterDomain = strings.Repeat("d", 253-20-len(".ns.svc."))
	if _, _, err := n.Address(strings.Repeat("s", 50)); err == nil || !strings.Contains(err.Error(), "cannot fit in 253 characters") {
		t.Errorf("error = %v", err)
	}
	// A short name still fits.
	if _, addr, err := n.Address("dep-a-0"); err != nil || !strings.HasPrefix(addr, "dep-a-0.ns.svc.") {
		t.Errorf("%s %v", addr, err)
	}
	if _, err := n.Instances("dep", strings.Repeat("g", 40), nil, 1); err == nil {
		t.Error("Instances hides the address error")
	}
}

// The director's template spec document, T22's fields included.
func TestSpec(t *testing.T) {
	n := Network{Namespace: "ns", ClusterDomain: "cluster.local"}
	insts, _ := n.Instances("dep", "ig", []string{"z1"}, 1)
	props := yamlvalue.NewMap()
	props.Set("port", int64(1))
	s := insts[0].Spec(SpecInput{
		Deployment: "dep", InstanceGroup: "ig",
		Jobs:       []JobRef{{"myjob", "1"}, {"other", "2"}},
		Properties: props, Release: JobRef{"rel", "1"},
	})
	js, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"deployment":"dep","job":{"name":"ig","templates":[{"name":"myjob","version":"1","sha1":null,"blobstore_id":null},{"name":"other","version":"2","sha1":null,"blobstore_id":null}],"template":"myjob","version":"1"},` +
		`"index":0,"bootstrap":true,"name":"ig","id":"` + insts[0].ID + `","az":"z1",` +
		`"networks":{"default":{"type":"manual","ip":null,"netmask":null,"gateway":null,"default":["dns","gateway"],"dns":[],"cloud_properties":{},"dns_record_name":"0.ig.default.dep.bosh"}},` +
		`"properties_need_filtering":true,"dns_domain_name":"bosh","persistent_disk":0,"address":"dep-ig-0.ns.svc.cluster.local","ip":null,` +
		`"properties":{"port":1},"links":{},"release":{"name":"rel","version":"1"}}`
	if string(js) != want {
		t.Errorf("got  %s\nwant %s", js, want)
	}
	noAZ, _ := n.Instances("dep", "ig", nil, 1)
	if az, _ := noAZ[0].Spec(SpecInput{}).Get("az"); az != nil {
		t.Errorf("az %v", az)
	}
}
