package app

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bosh-injector/bosh-injector/gather/render/ruby"
)

// TestHostileTemplates replays, through the commands that render offline,
// release templates that hang, end Ruby, write outside and run programs:
// each ends in exit 1 with an error naming the job and template, no stack,
// in seconds, and nothing outside the output directory is created.
func TestHostileTemplates(t *testing.T) {
	if _, err := ruby.ConfineOffline(); err != nil {
		t.Skip(err)
	}
	outside := t.TempDir()
	q := strconv.Quote(filepath.Join(outside, "x"))
	// Long enough for Ruby to start on a loaded machine.
	const timeout = "6s"
	for _, c := range []struct{ name, command, template, source, want string }{
		{"template: loop", "template", "storefront.yml.erb", "<% loop {} %>", "(rendering did not finish within the render timeout of 6s)"},
		{"template: exit!", "template", "storefront.yml.erb", "<% exit!(7) %>", "(Ruby ended while rendering it: exit status 7)"},
		{"template: writes outside", "template", "storefront.yml.erb", "<% File.write(" + q + ", 'x') %>", "(line 1: Permission denied"},
		{"template: runs a program", "template", "storefront.yml.erb", "<%= `touch " + filepath.Join(outside, "x") + "` %>", "(line 1: Permission denied"},
		{"objects: exit", "objects", "bpm.yml.erb", "<% exit %>", "(Ruby ended while rendering it: exit status 0)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			shop := filepath.Join(t.TempDir(), "shop")
			if err := os.CopyFS(shop, os.DirFS(filepath.Join(fixtures, "releases", "shop"))); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(shop, "jobs", "storefront", "templates", c.template), []byte(c.source), 0o644); err != nil {
				t.Fatal(err)
			}
			output := filepath.Join(t.TempDir(), "out")
			args := append([]string{c.command, "--manifest", filepath.Join(fixtures, "deployments", "shop.yml"), "--render-timeout", timeout}, shopReleases[:4]...)
			args = append(args, "--release", "shop="+shop)
			if c.command == "template" {
				args = append(args, "--output", output)
			}
			start := time.Now()
			code, out, errOut := run(args...)
			if took := time.Since(start); took > 30*time.Second {
				t.Errorf("took %s", took)
			}
			msg := out + errOut
			if code != 1 {
				t.Errorf("exit %d, want 1: %s", code, msg)
			}
			for _, want := range []string{"Unable to render templates for job 'storefront'", "Error filling in template '" + c.template + "' " + c.want} {
				if !strings.Contains(msg, want) {
					t.Errorf("output %q lacks %q", msg, want)
				}
			}
			for _, stack := range []string{"goroutine ", ".go:", ".rb:"} {
				if strings.Contains(msg, stack) {
					t.Errorf("output %q holds a stack", msg)
				}
			}
			if entries, _ := os.ReadDir(outside); len(entries) > 0 {
				t.Errorf("%s was written to", outside)
			}
			if _, err := os.Stat(output); err == nil {
				t.Errorf("%s was created", output)
			}
		})
	}
}
