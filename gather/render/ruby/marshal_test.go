package ruby

import (
	"bytes"
	"testing"

	"github.com/bosh-injector/bosh-injector/gather/model/yamlvalue"
)

func TestSharedMapWrittenOnce(t *testing.T) {
	shared := yamlvalue.NewMap()
	shared.Set("marker", "only-once")
	var jobs []Job
	for range 3 {
		s := yamlvalue.NewMap()
		s.Set("links", shared)
		jobs = append(jobs, Job{Spec: s})
	}
	data, err := marshalBatch(jobs)
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(data, []byte("only-once")); n != 1 {
		t.Errorf("the shared map is written %d times", n)
	}
}
