package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/bosh-injector/bosh-injector/test/controlplane"
	"github.com/bosh-injector/bosh-injector/test/walkthrough"
)

// `make demo` as a newcomer runs it: the narration reaches the rendered
// configuration, the render failure and the Events, with credentials
// redacted, and the demo exits cleanly.
func TestDemo(t *testing.T) {
	if _, err := controlplane.BinDir(); err != nil {
		t.Fatal(err)
	}
	binary, err := walkthrough.BuildBinary(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := run(context.Background(), walkthrough.Options{Binary: binary, Out: &out}); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, want := range []string{
		"listen_port: 8080",
		"password: (shop.var-db-password password)",
		"Error filling in template 'bus.conf.erb' (line 10: Can't find property '[\"bus.password\"]')",
		"- Unable to render jobs for instance group 'bus'. Errors are:",
		"GatherFailed",
		"Running",
		"Gathered       Secret/shop-manifest",
		"Removing what the walkthrough started",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the demo's output lacks %q:\n%s", want, out.String())
		}
	}
}
