package releaseimage_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bosh-injector/bosh-injector/test/podman"
	"github.com/bosh-injector/bosh-injector/test/releaseimage"
)

const base = "docker.io/library/debian:bookworm-slim"

func TestBuild(t *testing.T) {
	if err := podman.Check(base); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(rel, content string) {
		t.Helper()
		path := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("jobs/web/spec", "name: web\ntemplates: {config.erb: config/config}\n")
	write("jobs/web/monit", "")
	write("jobs/web/templates/config.erb", "port: <%= p('port') %>\n")
	write("bin-src/web", "#!/bin/sh\necho hi\n")

	image := "localhost/releaseimage-test:1"
	err := releaseimage.Build(context.Background(), releaseimage.Release{
		Dir: dir, Base: base, Image: image,
		Packages: map[string]map[string]string{"web": {"bin/web": filepath.Join(dir, "bin-src/web")}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = podman.Command(context.Background(), "rmi", "-f", image).Run() })

	out, err := podman.Command(context.Background(), "run", "--rm", "--network=none", image, "sh", "-c",
		"cd /var/vcap && find jobs-src packages -type f | sort && packages/web/bin/web").CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	want := "jobs-src/web/job.MF\njobs-src/web/monit\njobs-src/web/templates/config.erb\npackages/web/bin/web\nhi"
	if got := strings.TrimSpace(string(out)); got != want {
		t.Fatalf("image holds\n%s\nwant\n%s", got, want)
	}
}
