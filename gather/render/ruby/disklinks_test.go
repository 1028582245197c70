package ruby_test

import (
	"testing"

	"github.com/bosh-injector/bosh-injector/gather/render/ruby"
)

// The director's multidisk test job (disk_using_job's disknames.json.erb)
// renders the disk links gather/model/links resolves from persistent_disks as
// unmanaged_persistent_disks_spec.rb expects: each link's properties are
// the disk's name.
func TestDiskLinks(t *testing.T) {
	links := `{"slow-disk-link-name":{"deployment_name":"dep","properties":{"name":"low-iops-persistent-disk-name"},"networks":[],"instances":[]},` +
		`"fast-disk-link-name":{"deployment_name":"dep","properties":{"name":"high-iops-persistent-disk-name"},"networks":[],"instances":[]}}`
	got := render(t, spec(propsP(nil), links), ruby.Template{Name: "disknames.json.erb", Source: `{
  "slow-disk": <%= JSON.dump(link('slow-disk-link-name').properties) %>,
  "fast-disk": <%= JSON.dump(link('fast-disk-link-name').p('name')) %>
}`})[0]
	want := `{
  "slow-disk": {"name":"low-iops-persistent-disk-name"},
  "fast-disk": "high-iops-persistent-disk-name"
}`
	if got.Error != "" || string(got.Content) != want {
		t.Errorf("got %q %s, want %s", got.Error, got.Content, want)
	}
}
