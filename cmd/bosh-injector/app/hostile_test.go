package app

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// hostileArgs, when set in the environment, makes the test binary run the
// CLI with these arguments (JSON) instead of the tests: each hostile case
// runs in a process of its own, so its exit status, time and peak memory
// are the command's.
const hostileArgs = "BOSH_INJECTOR_HOSTILE_ARGS"

func TestMain(m *testing.M) {
	if args := os.Getenv(hostileArgs); args != "" {
		var a []string
		if err := json.Unmarshal([]byte(args), &a); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		os.Exit(Main(a, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// hostileBase is a manifest every template and objects case starts from;
// a case replaces one line or adds to it.
const hostileBase = `name: d
releases:
- {name: shop, version: "1.0.0"}
stemcells:
- {alias: default, os: ubuntu-noble, version: "1.0"}
update: {canaries: 1, max_in_flight: 1, canary_watch_time: 1000, update_watch_time: 1000}
instance_groups:
- name: web
  azs: [z1]
  instances: 1
  stemcell: default
  networks: [{name: default}]
  jobs:
  - {name: smoke-tests, release: shop}
`

// hostileCase is a bad input replayed against the real command: it must
// exit 1 with an error saying every want, print no stack, stay within
// the time and memory bounds, and change nothing under the workspace but
// output.
type hostileCase struct {
	name string
	// args are the command line; the case runs in ws/rel, a release
	// directory holding manifest.yml (from manifest) and a user's file.
	args     []string
	manifest string
	// pad is the length of a comment appended to the manifest.
	pad int
	// prepare makes more inputs in the workspace (absolute ws).
	prepare func(t *testing.T, ws string)
	want    []string
	// output is the directory, relative to ws, the case may change.
	output string
	// tmpfs, when set, is the size of a tmpfs the command gets as TMPDIR.
	tmpfs int
}

func replace(old, new string) string { return strings.Replace(hostileBase, old, new, 1) }

var templateArgs = []string{"template", "--manifest", "manifest.yml", "--release", "shop=.", "--vars-store", "../creds.yml"}

func hostileTemplate(extra ...string) []string {
	return append(append([]string{}, templateArgs...), extra...)
}

var hostileCases = []hostileCase{
	// template never removes what it did not write.
	{name: "output is the working directory", args: hostileTemplate("--output", "."),
		want: []string{"--output .", "not empty", "not a previous render"}},
	{name: "output is the parent directory", args: hostileTemplate("--output", ".."),
		want: []string{"--output ..", "not empty"}},
	{name: "output is the release directory", args: hostileTemplate("--output", "../rel"),
		want: []string{"--output ../rel", "not empty"}},
	{name: "output is a file", args: hostileTemplate("--output", "notes.txt"),
		want: []string{"--output notes.txt", "not a directory"}},
	{name: "vars store inside the output", args: hostileTemplate("--vars-store", "../out/creds.yml", "--output", "../out"),
		prepare: func(t *testing.T, ws string) { writeRender(t, filepath.Join(ws, "out")) },
		want:    []string{"--vars-store ../out/creds.yml", "inside --output ../out"}, output: "out"},
	{name: "manifest inside a previous render", args: []string{"template", "--manifest", "../out/m.yml", "--release", "shop=.", "--output", "../out"},
		prepare: func(t *testing.T, ws string) {
			writeRender(t, filepath.Join(ws, "out"))
			writeFile(t, filepath.Join(ws, "out", "m.yml"), hostileBase)
		},
		want: []string{"--manifest ../out/m.yml", "inside --output ../out"}, output: "out"},
	{name: "output holds the working directory", args: hostileTemplate("--output", ".."),
		prepare: func(t *testing.T, ws string) { writeFile(t, filepath.Join(ws, renderMarker), "") },
		want:    []string{"--output ..", "holds the working directory"}},
	// Names that would become paths.
	{name: "instance group name leaves the output", args: hostileTemplate("--output", "../out"), output: "out",
		manifest: replace("name: web", "name: ../../x"), want: []string{"Invalid instance group name \"../../x\"", "'/'"}},
	{name: "NUL in an instance group name", args: hostileTemplate("--output", "../out"), output: "out",
		manifest: replace("name: web", `name: "a\0b"`), want: []string{`Invalid instance group name "a\x00b"`, "NUL"}},
	{name: "job name leaves its directory", args: hostileTemplate("--output", "../out"), output: "out",
		manifest: replace("name: smoke-tests,", "name: ../x,"), want: []string{`Invalid job name "../x"`}},
	{name: "release name is a dot-dot", args: hostileTemplate("--output", "../out"), output: "out",
		manifest: replace(`{name: shop, version: "1.0.0"}`, `{name: "..", version: "1"}`), want: []string{`Invalid release name ".."`}},
	{name: "template destination leaves the job", args: hostileTemplate("--output", "../out"), output: "out",
		manifest: replace("name: smoke-tests,", "name: evil,"),
		prepare: func(t *testing.T, ws string) {
			writeFile(t, filepath.Join(ws, "rel", "jobs", "evil", "spec"), "name: evil\ntemplates: {x.erb: ../../../escape}\n")
			writeFile(t, filepath.Join(ws, "rel", "jobs", "evil", "monit"), "")
			writeFile(t, filepath.Join(ws, "rel", "jobs", "evil", "templates", "x.erb"), "x")
		},
		want: []string{"Job 'evil' template 'x.erb' -> '../../../escape' escapes its directory"}},
	// Bounds.
	{name: "manifest is /dev/zero", args: hostileTemplate("--output", "../out"), output: "out",
		manifest: hostileBase, want: []string{"--manifest /dev/zero", "16 MiB"}},
	{name: "a billion instances", args: hostileTemplate("--output", "../out"), output: "out",
		manifest: replace("instances: 1", "instances: 1000000000"), want: []string{"instances", "1000000000", "more than the 10000"}},
	{name: "a password of a billion characters", args: hostileTemplate("--output", "../out"), output: "out",
		manifest: hostileBase + "variables:\n- {name: p, type: password, options: {length: 1000000000}}\n",
		want:     []string{"'p'", "option 'length' 1000000000", "4096"}},
	// The director's refusals.
	{name: "the same job twice", args: hostileTemplate("--output", "../out"), output: "out",
		manifest: replace("  - {name: smoke-tests, release: shop}\n", "  - {name: smoke-tests, release: shop}\n  - {name: smoke-tests, release: shop}\n"),
		want:     []string{"Colocated job 'smoke-tests' is already added to the instance group 'web'"}},
	{name: "the same release twice", args: hostileTemplate("--output", "../out"), output: "out",
		manifest: replace(`- {name: shop, version: "1.0.0"}`, `- {name: shop, version: "1.0.0"}`+"\n"+`- {name: shop, version: "2"}`),
		want:     []string{"Duplicate release name 'shop'"}},
	{name: "unknown stemcell alias", args: hostileTemplate("--output", "../out"), output: "out",
		manifest: replace("stemcell: default", "stemcell: nope"), want: []string{"Instance group 'web' references an unknown stemcell 'nope'"}},
	{name: "empty azs", args: hostileTemplate("--output", "../out"), output: "out",
		manifest: replace("azs: [z1]", "azs: []"), want: []string{"Instance group 'web' has empty availability zones"}},
	{name: "negative persistent disk", args: hostileTemplate("--output", "../out"), output: "out",
		manifest: replace("instances: 1", "instances: 1\n  persistent_disk: -5"), want: []string{"Instance group 'web' references an invalid persistent disk size '-5'"}},
	// Flags.
	{name: "negative index", args: hostileTemplate("--output", "../out", "--index", "-5"), want: []string{"--index -5"}},
	{name: "ip that is not one", args: hostileTemplate("--output", "../out", "--ip", "not-an-ip"), want: []string{`--ip "not-an-ip"`}},
	{name: "release given twice", args: hostileTemplate("--output", "../out", "--release", "shop=.."), output: "out",
		want: []string{"--release shop: given twice"}},
	{name: "vars store is a directory", args: hostileTemplate("--output", "../out", "--vars-store", ".."), output: "out",
		want: []string{"--vars-store ..", "is a directory"}},
	{name: "namespace that is not a name", args: hostileTemplate("--output", "../out", "--namespace", "Bad_NS"),
		want: []string{`--namespace "Bad_NS"`}},
	// objects validates what it prints.
	{name: "objects: five billion instances", args: []string{"objects", "--manifest", "manifest.yml"},
		manifest: replace("instances: 1", "instances: 5000000000"), want: []string{"instances", "5000000000", "more than the 10000"}},
	{name: "objects: max_in_flight lots", args: []string{"objects", "--manifest", "manifest.yml"},
		manifest: replace("max_in_flight: 1", "max_in_flight: lots"), want: []string{"update.max_in_flight", "lots"}},
	{name: "objects: group max_in_flight beyond any count", args: []string{"objects", "--manifest", "manifest.yml"},
		manifest: replace("instances: 1", "instances: 1\n  update: {max_in_flight: 5000000000}"), want: []string{"instance_groups.web.update.max_in_flight", "5000000000"}},
	{name: "objects: watch time not a range", args: []string{"objects", "--manifest", "manifest.yml"},
		manifest: replace("canary_watch_time: 1000", "canary_watch_time: soon"), want: []string{"update.canary_watch_time", "Watch time should be an integer or a range of two integers"}},
	{name: "objects: negative persistent disk", args: []string{"objects", "--manifest", "manifest.yml"},
		manifest: replace("instances: 1", "instances: 1\n  persistent_disk: -5"), want: []string{"invalid persistent disk size '-5'"}},
	{name: "objects: a Secret over 1 MiB", args: []string{"objects", "--manifest", "manifest.yml"},
		manifest: hostileBase, pad: 2 << 20, want: []string{"manifest Secret 'd-manifest'", "1 MiB"}},
	{name: "objects: a 50 MB manifest", args: []string{"objects", "--manifest", "manifest.yml"},
		manifest: hostileBase, pad: 50 << 20, want: []string{"--manifest manifest.yml", "16 MiB"}},
	{name: "objects: namespace", args: []string{"objects", "--manifest", "manifest.yml", "--namespace", "-bad"},
		manifest: hostileBase, want: []string{`--namespace "-bad"`}},
	{name: "objects: storage class", args: []string{"objects", "--manifest", "manifest.yml", "--storage-class-map", "big=Not A Class"},
		manifest: hostileBase, want: []string{"--storage-class-map big=Not A Class"}},
	{name: "objects: negative disk size", args: []string{"objects", "--manifest", "manifest.yml", "--disk-size", "big=-5Gi"},
		manifest: hostileBase, want: []string{"--disk-size big=-5Gi", "positive"}},
	// release-image reads only the tarball's own members.
	{name: "release-image: job name leaves the tarball", args: releaseImageArgs("../evil.tgz"),
		prepare: func(t *testing.T, ws string) {
			outside := "read me"
			writeFile(t, filepath.Join(ws, "outside.tgz"), outside)
			writeReleaseTarball(t, filepath.Join(ws, "evil.tgz"), "bus", "1", []tarMember{}, fmt.Sprintf("jobs:\n- {name: ../../outside, version: v, fingerprint: f, sha1: %s}\n", sha1Hex(outside)))
		},
		want: []string{"evil.tgz", `Invalid job name "../../outside"`}},
	{name: "release-image: the same release twice", args: releaseImageArgs("../a.tgz", "../b.tgz"),
		prepare: func(t *testing.T, ws string) {
			writeReleaseTarball(t, filepath.Join(ws, "a.tgz"), "bus", "1", nil, "jobs: []\n")
			writeReleaseTarball(t, filepath.Join(ws, "b.tgz"), "bus", "1", nil, "jobs: []\n")
		},
		want: []string{"release 'bus' version '1' is given twice", "a.tgz", "b.tgz"}},
	{name: "release-image: a fifo", args: releaseImageArgs("../fifo.tgz"),
		prepare: func(t *testing.T, ws string) {
			writeReleaseTarball(t, filepath.Join(ws, "fifo.tgz"), "bus", "1", []tarMember{{name: "jobs/x.tgz", typ: tar.TypeFifo}}, "jobs: []\n")
		},
		want: []string{"fifo.tgz", "jobs/x.tgz", "device or fifo"}},
	{name: "release-image: a device", args: releaseImageArgs("../dev.tgz"),
		prepare: func(t *testing.T, ws string) {
			writeReleaseTarball(t, filepath.Join(ws, "dev.tgz"), "bus", "1", []tarMember{{name: "dev", typ: tar.TypeChar}}, "jobs: []\n")
		},
		want: []string{"dev.tgz", "device or fifo"}},
	{name: "release-image: a member twice", args: releaseImageArgs("../dup.tgz"),
		prepare: func(t *testing.T, ws string) {
			writeReleaseTarball(t, filepath.Join(ws, "dup.tgz"), "bus", "1", []tarMember{{name: "jobs/x.tgz", data: "a"}, {name: "jobs/x.tgz", data: "b"}}, "jobs: []\n")
		},
		want: []string{"dup.tgz", "jobs/x.tgz", "twice"}},
	{name: "release-image: a job listed twice", args: releaseImageArgs("../twice.tgz"),
		prepare: func(t *testing.T, ws string) {
			writeReleaseTarball(t, filepath.Join(ws, "twice.tgz"), "bus", "1", nil, "jobs:\n- {name: x, sha1: a}\n- {name: x, sha1: a}\n")
		},
		want: []string{"twice.tgz", "job 'x' is listed twice"}},
	{name: "release-image: a name no image may have", args: releaseImageArgs("../upper.tgz"),
		prepare: func(t *testing.T, ws string) {
			writeReleaseTarball(t, filepath.Join(ws, "upper.tgz"), "Bus!", "1", nil, "jobs: []\n")
		},
		want: []string{"release 'Bus!'", "not a valid image reference"}},
}

func releaseImageArgs(tarballs ...string) []string {
	return append([]string{"release-image", "--repository", "localhost/hostile", "--stemcell-image", "oci:/nonexistent",
		"--stemcell-os", "ubuntu-noble", "--stemcell-version", "1.0", "--cache", "../cache"}, tarballs...)
}

// TestHostileInput replays each hostile case against the real command in
// a process of its own.
func TestHostileInput(t *testing.T) {
	for _, c := range slices.Concat(hostileCases, reachCases) {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			base := t.TempDir()
			ws := filepath.Join(base, "ws")
			rel := filepath.Join(ws, "rel")
			copyDir(t, filepath.Join(fixtures, "releases", "shop"), rel)
			writeFile(t, filepath.Join(rel, "manifest.yml"), c.manifest+"# "+strings.Repeat("x", c.pad)+"\n")
			writeFile(t, filepath.Join(rel, "notes.txt"), "a user's file\n")
			writeFile(t, filepath.Join(ws, "creds.yml"), "kept: secret\n")
			if c.prepare != nil {
				c.prepare(t, ws)
			}
			args := c.args
			if c.name == "manifest is /dev/zero" {
				args = slicesReplace(args, "manifest.yml", "/dev/zero")
			}
			skip := ""
			if c.output != "" {
				skip = filepath.Join(ws, c.output)
			}
			before := snapshot(t, base, skip)
			tmp := ""
			if c.tmpfs > 0 {
				tmp = smallTmpfs(t, c.tmpfs)
			}
			code, out, took, rss := runHostile(t, rel, args, tmp)
			t.Logf("exit %d in %v, peak %d MiB:\n%s", code, took.Round(time.Millisecond), rss>>20, out)
			if code != 1 {
				t.Errorf("exit status %d, want 1:\n%s", code, out)
			}
			for _, w := range c.want {
				if !strings.Contains(out, w) {
					t.Errorf("the error does not say %q:\n%s", w, out)
				}
			}
			if strings.Contains(out, plantedSecret) {
				t.Errorf("the output shows the planted secret:\n%s", out)
			}
			for _, stack := range []string{"goroutine ", "panic:", ".go:", ".rb:"} {
				if strings.Contains(out, stack) {
					t.Errorf("the output holds a stack (%q):\n%s", stack, out)
				}
			}
			if took > 30*time.Second {
				t.Errorf("took %v, more than 30 s", took)
			}
			if rss > 1<<30 {
				t.Errorf("peak memory %d MiB, more than 1 GiB", rss>>20)
			}
			if after := snapshot(t, base, skip); !equalSnapshots(t, before, after) {
				t.Error("the workspace outside the output changed")
			}
		})
	}
}

// runHostile runs the CLI in dir in a process of its own (with tmp as
// TMPDIR when set) and gives its exit status, combined output, time and
// peak resident memory in bytes.
func runHostile(t *testing.T, dir string, args []string, tmp string) (int, string, time.Duration, int64) {
	t.Helper()
	cmd := hostileCommand(dir, args, tmp)
	timer := time.AfterFunc(60*time.Second, func() { _ = cmd.Process.Kill() })
	defer timer.Stop()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	took := time.Since(start)
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatal(err)
	}
	var rss int64
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		rss = ru.Maxrss << 10 // KiB on Linux
	}
	return cmd.ProcessState.ExitCode(), out.String(), took, rss
}

// hostileCommand is the CLI with args in dir, its environment holding the
// planted secret (which nothing may show) and tmp as TMPDIR when set.
func hostileCommand(dir string, args []string, tmp string) *exec.Cmd {
	enc, _ := json.Marshal(args)
	cmd := exec.Command(os.Args[0])
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), hostileArgs+"="+string(enc), "PLANTED_TOKEN="+plantedSecret)
	if tmp != "" {
		cmd.Env = append(cmd.Env, "TMPDIR="+tmp)
	}
	return cmd
}

// snapshot records every entry under root but skip: its kind, mode, size,
// modification time and content digest.
func snapshot(t *testing.T, root, skip string) map[string]string {
	t.Helper()
	entries := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if skip != "" && p == skip {
			return filepath.SkipDir
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		digest := ""
		if info.Mode().IsRegular() {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			digest = sha1Hex(string(data))
		}
		entries[p] = fmt.Sprintf("%v %d %v %s", info.Mode(), info.Size(), info.ModTime().UnixNano(), digest)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return entries
}

func equalSnapshots(t *testing.T, before, after map[string]string) bool {
	t.Helper()
	same := true
	for p, b := range before {
		if a, ok := after[p]; !ok {
			t.Errorf("%s was removed", p)
			same = false
		} else if a != b {
			t.Errorf("%s changed: %s -> %s", p, b, a)
			same = false
		}
	}
	for p := range after {
		if _, ok := before[p]; !ok {
			t.Errorf("%s was created", p)
			same = false
		}
	}
	return same
}

func slicesReplace(args []string, old, new string) []string {
	out := append([]string{}, args...)
	for i, a := range out {
		if a == old {
			out[i] = new
		}
	}
	return out
}

func writeFile(t *testing.T, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// writeRender makes dir look like a previous render of template's.
func writeRender(t *testing.T, dir string) {
	t.Helper()
	writeFile(t, filepath.Join(dir, renderMarker), "")
	writeFile(t, filepath.Join(dir, "web", "bpm.json"), "[]\n")
}

func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
}

func sha1Hex(s string) string {
	h := sha1.Sum([]byte(s))
	return hex.EncodeToString(h[:])
}

type tarMember struct {
	name string
	typ  byte
	data string
}

// writeReleaseTarball writes a release tarball of members and a release.MF
// naming name and version, with entries (YAML) appended.
func writeReleaseTarball(t *testing.T, p, name, version string, members []tarMember, entries string) {
	t.Helper()
	mf := fmt.Sprintf("name: %q\nversion: %q\n%s", name, version, entries)
	members = append([]tarMember{{name: "release.MF", data: mf}}, members...)
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, m := range members {
		typ := m.typ
		if typ == 0 {
			typ = tar.TypeReg
		}
		h := &tar.Header{Name: "./" + m.name, Typeflag: typ, Mode: 0o644}
		if typ == tar.TypeReg {
			h.Size = int64(len(m.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if typ == tar.TypeReg {
			if _, err := tw.Write([]byte(m.data)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	writeFile(t, p, buf.String())
}
