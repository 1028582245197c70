package contract_test

import (
	"testing"

	"github.com/bosh-injector/bosh-injector/inject/runtime/contract"
)

// An Encoder's plans are byte for byte what Plan.Encode makes of them,
// whatever the names hold.
func TestEncoderEncodesAsPlanEncode(t *testing.T) {
	shared := []contract.Plan{
		{},
		{Containers: []string{}},
		{Containers: []string{"web-server", `odd,"containers":[]`}, Jobs: []contract.Job{{Name: "web", Scripts: []string{contract.PostStart}, Host: "web-server"}},
			PersistentDiskMB: 1024, DrainSeconds: 120},
	}
	own := []contract.Plan{
		{},
		{Job: "web", Process: "server", Container: "web-server"},
		{Job: `a,"containers":"b`, Process: "\"\\<&>", Monit: true, Container: "é"},
	}
	for _, s := range shared {
		enc := contract.NewEncoder(s)
		for _, o := range own {
			want := o
			want.Containers, want.Jobs, want.PersistentDiskMB, want.DrainSeconds = s.Containers, s.Jobs, s.PersistentDiskMB, s.DrainSeconds
			if got := enc.Encode(o); got != want.Encode() {
				t.Errorf("Encoder gave\n%s\nPlan.Encode gives\n%s", got, want.Encode())
			}
		}
	}
}
