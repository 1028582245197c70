package resolved_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/bosh-injector/bosh-injector/gather/model/deployment"
	"github.com/bosh-injector/bosh-injector/gather/model/instance"
	"github.com/bosh-injector/bosh-injector/gather/model/variables"
	"github.com/bosh-injector/bosh-injector/gather/render/resolved"
)

// The render step rebuilds every instance's template specs from the Secret's
// content alone: they must equal what the model computed for the deployment.
func TestInstanceSpecsRoundTrip(t *testing.T) {
	const fixtures = "../../../test/fixtures"
	data, err := os.ReadFile(filepath.Join(fixtures, "deployments", "shop.yml"))
	if err != nil {
		t.Fatal(err)
	}
	vars := variables.NewMapSource(nil)
	m, err := deployment.Load(data, nil, vars, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	specs := deployment.SourceTreeSpecs(map[string]string{
		"bus": filepath.Join(fixtures, "releases", "bus"), "store": filepath.Join(fixtures, "releases", "store"),
		"shop": filepath.Join(fixtures, "releases", "shop"),
	})
	net := instance.Network{Namespace: "shop-ns", ClusterDomain: "cluster.local"}
	d, err := deployment.Resolve(deployment.Input{Manifest: m, Specs: specs, Variables: vars, Network: net})
	if err != nil {
		t.Fatal(err)
	}
	for gi := range d.Groups {
		g := &d.Groups[gi]
		encoded, err := json.Marshal(resolved.FromDeployment(d, g, net.ClusterDomain))
		if err != nil {
			t.Fatal(err)
		}
		var decoded resolved.Group
		if err := json.Unmarshal(encoded, &decoded); err != nil {
			t.Fatal(err)
		}
		for _, want := range g.Instances {
			inst, got, err := decoded.Instance(net.Namespace, want.Index, "10.1.2.3")
			if err != nil {
				t.Fatal(err)
			}
			if inst != want.Instance {
				t.Errorf("%s/%d: instance %+v, want %+v", g.Manifest.Name, want.Index, inst, want.Instance)
			}
			for ji, spec := range want.Specs {
				before, _ := json.Marshal(spec)
				w, _ := json.Marshal(resolved.WithIP(spec, "10.1.2.3"))
				if after, _ := json.Marshal(spec); string(after) != string(before) {
					t.Errorf("WithIP changed the model's spec")
				}
				gotJSON, _ := json.Marshal(got[ji])
				if string(gotJSON) != string(w) {
					t.Errorf("%s/%d job %s: spec\n%s\nwant\n%s", g.Manifest.Name, want.Index, g.Jobs[ji].Name, gotJSON, w)
				}
			}
		}
	}
	if _, _, err := (&resolved.Group{InstanceGroup: "web", Instances: 2}).Instance("ns", 2, ""); err == nil ||
		err.Error() != "instance index 2 is beyond instance group 'web', which has 2 instances" {
		t.Errorf("index beyond instances: %v", err)
	}
}
