package app

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// plantedSecret is in every hostile case's environment and in the files
// cases plant outside the release: no output may show it.
const plantedSecret = "planted-secret-7f3a9c"

// evilJob makes job "evil" in the release of ws with one template, x.erb,
// of source; the manifest names it with evilManifest.
func evilJob(t *testing.T, ws, source string) {
	t.Helper()
	writeFile(t, filepath.Join(ws, "rel", "jobs", "evil", "spec"), "name: evil\ntemplates: {x.erb: x}\n")
	writeFile(t, filepath.Join(ws, "rel", "jobs", "evil", "monit"), "")
	writeFile(t, filepath.Join(ws, "rel", "jobs", "evil", "templates", "x.erb"), source)
}

var evilManifest = replace("name: smoke-tests,", "name: evil,")

// symlink replaces p with a link to target.
func symlink(t *testing.T, target, p string) {
	t.Helper()
	if err := os.RemoveAll(p); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, p); err != nil {
		t.Fatal(err)
	}
}

// planted writes the planted secret outside the release (ws/secret.key).
func planted(t *testing.T, ws string) string {
	t.Helper()
	p := filepath.Join(ws, "secret.key")
	writeFile(t, p, "-----BEGIN KEY-----\n"+plantedSecret+"\n-----END KEY-----\n")
	return p
}

func hostileObjects(extra ...string) []string {
	return append([]string{"objects", "--manifest", "manifest.yml"}, extra...)
}

// reachCases are the second round of hostile input (issue 38): what a
// release or manifest reaches beyond its own files, secrets in errors,
// memory that input size multiplies, flags and quantities.
var reachCases = []hostileCase{
	// Go reads a release's files only inside the release.
	{name: "template linked to a key outside the release", args: hostileTemplate("--output", "../out"), output: "out", manifest: evilManifest,
		prepare: func(t *testing.T, ws string) {
			evilJob(t, ws, "")
			symlink(t, planted(t, ws), filepath.Join(ws, "rel", "jobs", "evil", "templates", "x.erb"))
		},
		want: []string{"jobs/evil/templates/x.erb", "escapes"}},
	{name: "templates directory linked outside", args: hostileTemplate("--output", "../out"), output: "out", manifest: evilManifest,
		prepare: func(t *testing.T, ws string) {
			evilJob(t, ws, "")
			writeFile(t, filepath.Join(ws, "elsewhere", "x.erb"), plantedSecret)
			symlink(t, filepath.Join(ws, "elsewhere"), filepath.Join(ws, "rel", "jobs", "evil", "templates"))
		},
		want: []string{"jobs/evil/templates/x.erb", "escapes"}},
	{name: "spec linked to /dev/zero", args: hostileTemplate("--output", "../out"), output: "out", manifest: evilManifest,
		prepare: func(t *testing.T, ws string) {
			evilJob(t, ws, "")
			symlink(t, "/dev/zero", filepath.Join(ws, "rel", "jobs", "evil", "spec"))
		},
		want: []string{"jobs/evil/spec", "escapes"}},
	{name: "spec is a FIFO", args: hostileTemplate("--output", "../out"), output: "out", manifest: evilManifest,
		prepare: func(t *testing.T, ws string) {
			evilJob(t, ws, "")
			spec := filepath.Join(ws, "rel", "jobs", "evil", "spec")
			_ = os.Remove(spec)
			if err := syscall.Mkfifo(spec, 0o644); err != nil {
				t.Fatal(err)
			}
		},
		want: []string{"jobs/evil/spec", "not a regular file"}},
	// Templates reach nothing beyond the release.
	{name: "template reads a link out of the release", args: hostileTemplate("--output", "../out"), output: "out", manifest: evilManifest,
		prepare: func(t *testing.T, ws string) {
			link := filepath.Join(ws, "rel", "link")
			symlink(t, planted(t, ws), link)
			evilJob(t, ws, "<%= File.read("+strconv.Quote(link)+") %>")
		},
		want: []string{"Error filling in template 'x.erb' (line 1: Permission denied"}},
	{name: "template sends UDP", args: hostileTemplate("--output", "../out"), output: "out", manifest: evilManifest,
		prepare: func(t *testing.T, ws string) {
			evilJob(t, ws, `<% require "socket"; UDPSocket.new.send("x", 0, "127.0.0.1", 53) %>`)
		},
		want: []string{"Error filling in template 'x.erb' (line 1: Permission denied"}},
	{name: "template connects to a UNIX socket", args: hostileTemplate("--output", "../out"), output: "out", manifest: evilManifest,
		prepare: func(t *testing.T, ws string) {
			// A listening socket, as a container engine's: in /tmp, as a
			// socket path is short.
			dir, err := os.MkdirTemp("", "engine-")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(dir) })
			l, err := net.Listen("unix", filepath.Join(dir, "engine.sock"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { l.Close() })
			evilJob(t, ws, `<% require "socket"; UNIXSocket.new(`+strconv.Quote(filepath.Join(dir, "engine.sock"))+`) %>`)
		},
		want: []string{"Error filling in template 'x.erb' (line 1: Permission denied"}},
	{name: "template prints the environment", args: hostileTemplate("--output", "../out"), output: "out", manifest: evilManifest,
		prepare: func(t *testing.T, ws string) { evilJob(t, ws, "<% raise ENV.to_h.inspect %>") },
		want:    []string{"Error filling in template 'x.erb' (line 1: {\"PATH\"=>"}},
	{name: "template allocates 4 GB", args: hostileTemplate("--output", "../out"), output: "out", manifest: evilManifest,
		prepare: func(t *testing.T, ws string) { evilJob(t, ws, "<%= 'a' * 4e9 %>") },
		want:    []string{"Error filling in template 'x.erb' (line (unknown): failed to allocate memory)"}},
	{name: "template renders a bpm.yml of 20M values", args: hostileTemplate("--output", "../out"), output: "out", manifest: evilManifest,
		prepare: func(t *testing.T, ws string) {
			evilJob(t, ws, "")
			writeFile(t, filepath.Join(ws, "rel", "jobs", "evil", "spec"), "name: evil\ntemplates: {x.erb: config/bpm.yml}\n")
			writeFile(t, filepath.Join(ws, "rel", "jobs", "evil", "templates", "x.erb"), `<%= "[" + "1," * 20_000_000 + "1]" %>`)
		},
		want: []string{"evil", "value separators"}},
	// Output writers.
	{name: "objects: output holds a link out", args: hostileObjects("--output", "../out"), output: "out", manifest: hostileBase,
		prepare: func(t *testing.T, ws string) {
			writeFile(t, filepath.Join(ws, "outside.yaml"), "a user's file\n")
			if err := os.MkdirAll(filepath.Join(ws, "out"), 0o755); err != nil {
				t.Fatal(err)
			}
			symlink(t, filepath.Join(ws, "outside.yaml"), filepath.Join(ws, "out", "secret-d-manifest.yaml"))
		},
		want: []string{"--output ../out", "not empty", "not a previous render"}},
	{name: "objects: output is /", args: hostileObjects("--output", "/"), manifest: hostileBase, want: []string{"--output /", "not empty"}},
	{name: "objects: output is /etc", args: hostileObjects("--output", "/etc"), manifest: hostileBase, want: []string{"--output /etc", "not empty"}},
	{name: "objects: output is a link", args: hostileObjects("--output", "../out"), manifest: hostileBase,
		prepare: func(t *testing.T, ws string) { symlink(t, filepath.Join(ws, "rel"), filepath.Join(ws, "out")) },
		want:    []string{"--output ../out", "symbolic link"}},
	{name: "release-image: OCI layout is /etc", args: append(releaseImageArgs("../a.tgz"), "--oci-layout", "/etc"),
		want: []string{"--oci-layout /etc", "not empty", "not a previous OCI image layout"}},
	// Variable values never in errors.
	{name: "group named after a generated key", args: hostileTemplate("--output", "../out", "--vars-store", "../store/creds.yml"), output: "store",
		manifest: replace("name: web", "name: ((c.private_key))") + "variables:\n- {name: c, type: rsa}\n",
		prepare:  func(t *testing.T, ws string) { writeFile(t, filepath.Join(ws, "store", "creds.yml"), "") },
		want:     []string{"Invalid instance group name", "<redacted>"}},
	{name: "unknown stemcell from a vars file", args: hostileTemplate("--output", "../out", "--vars-file", "../vars.yml"), output: "out",
		manifest: replace("stemcell: default", "stemcell: ((st))"),
		prepare:  func(t *testing.T, ws string) { writeFile(t, filepath.Join(ws, "vars.yml"), "st: "+plantedSecret+"\n") },
		want:     []string{"references an unknown stemcell '<redacted>'"}},
	// Memory that input size multiplies.
	{name: "7M scalars in a flow sequence", args: hostileTemplate("--output", "../out"), output: "out", prepare: manyScalars,
		want: []string{"value separators"}},
	{name: "objects: 7M scalars in a flow sequence", args: hostileObjects(), prepare: manyScalars,
		want: []string{"manifest.yml", "value separators"}},
	{name: "2000 references to a 1 MiB value in one string", args: hostileTemplate("--output", "../out", "--vars-file", "../vars.yml"), output: "out",
		manifest: hostileBase + "tags: {x: \"" + strings.Repeat("((s))", 2000) + "\"}\n",
		prepare: func(t *testing.T, ws string) {
			writeFile(t, filepath.Join(ws, "vars.yml"), "s: "+strings.Repeat("a", 1<<20)+"\n")
		},
		want: []string{"'((s))'", "128 MiB"}},
	{name: "600 references to a list of 200k items", args: hostileTemplate("--output", "../out", "--vars-file", "../vars.yml"), output: "out",
		manifest: hostileBase + "tags: {x: [" + strings.Repeat("((l)),", 600) + "]}\n",
		prepare: func(t *testing.T, ws string) {
			writeFile(t, filepath.Join(ws, "vars.yml"), "l:\n"+strings.Repeat("- x\n", 200000))
		},
		want: []string{"'((l))'", "128 MiB"}},
	{name: "an ops path of 100k segments", args: hostileTemplate("--output", "../out", "--ops-file", "../ops.yml"), output: "out", manifest: hostileBase,
		prepare: func(t *testing.T, ws string) {
			writeFile(t, filepath.Join(ws, "ops.yml"), "- {type: replace, path: \""+strings.Repeat("/a?", 100000)+"\", value: 1}\n")
		},
		want: []string{"ops.yml", "at most 256 path segments"}},
	{name: "objects: 100 groups of 10000 instances", args: hostileObjects(), manifest: manyGroups(100, 10000),
		want: []string{"1000000 instances in all", "more than the 20000"}},
	// Flags and quantities.
	{name: "cluster domain with a newline", args: hostileTemplate("--output", "../out", "--cluster-domain", "cluster.local\nevil: x"),
		want: []string{`--cluster-domain "cluster.local\nevil: x"`}},
	{name: "persistent disk of 2^63-1 MiB", args: hostileTemplate("--output", "../out"), output: "out",
		manifest: replace("instances: 1", "instances: 1\n  persistent_disk: 9223372036854775807"), want: []string{"invalid persistent disk size '9223372036854775807'"}},
	{name: "objects: ram of 2^63-1 MiB", args: hostileObjects(),
		manifest: strings.NewReplacer("instances: 1", "instances: 1\n  vm_resources: {cpu: 1, ram: 9223372036854775807}", `version: "1.0.0"}`, `version: "1.0.0", image: "example.org/shop:1"}`).Replace(hostileBase), want: []string{"vm_resources.ram", "9223372036854775807"}},
	// release-image writes only what release.MF lists: a 64 MiB member
	// it does not list does not fit the 8 MiB temp directory.
	{name: "release-image: a large member release.MF does not list", args: releaseImageArgs("../extra.tgz"), tmpfs: 8 << 20,
		prepare: func(t *testing.T, ws string) {
			writeReleaseTarball(t, filepath.Join(ws, "extra.tgz"), "bus", "1", []tarMember{{name: "jobs/extra.tgz", data: strings.Repeat("\x00", 64<<20)}},
				"jobs:\n- {name: x, version: v, fingerprint: f, sha1: "+sha1Hex("x")+"}\n")
		},
		want: []string{"extra.tgz", "jobs/x.tgz", "missing from the tarball"}},
}

// manyScalars writes a 14 MiB manifest of 7M scalars (under the 16 MiB
// an input file may be).
func manyScalars(t *testing.T, ws string) {
	writeFile(t, filepath.Join(ws, "rel", "manifest.yml"), hostileBase+"x: ["+strings.Repeat("1,", 7<<20)+"1]\n")
}

// manyGroups is a manifest of groups groups of instances each.
func manyGroups(groups, instances int) string {
	var b strings.Builder
	b.WriteString(strings.TrimSuffix(hostileBase, hostileBase[strings.Index(hostileBase, "- name: web"):]))
	for i := range groups {
		fmt.Fprintf(&b, "- {name: g%d, azs: [z1], instances: %d, stemcell: default, networks: [{name: default}], jobs: [{name: smoke-tests, release: shop}]}\n", i, instances)
	}
	return b.String()
}

// smallTmpfs mounts a tmpfs of size bytes on a new directory, unmounted
// when the test ends; it skips the test where mounting is not allowed.
func smallTmpfs(t *testing.T, size int) string {
	t.Helper()
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d,mode=0755", size)); err != nil {
		t.Skipf("mounting a tmpfs: %v", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, 0); err != nil {
			t.Errorf("unmounting %s: %v", dir, err)
		}
	})
	return dir
}

// TestVarsStoreFullDisk fills the disk of the vars store while template
// adds a variable to it: exit 1 naming the store, no render written, and
// the previous store left whole (not truncated) for the next run.
func TestVarsStoreFullDisk(t *testing.T) {
	t.Parallel()
	disk := smallTmpfs(t, 64<<10)
	store := filepath.Join(disk, "creds.yml")
	previous := "ca: {certificate: " + strings.Repeat("c", 20<<10) + "}\n"
	writeFile(t, store, previous)
	// The rest of the disk, less than the new store needs.
	filler, err := os.Create(filepath.Join(disk, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = filler.Write(make([]byte, 64<<10))
	filler.Close()
	ws := t.TempDir()
	rel := filepath.Join(ws, "rel")
	copyDir(t, filepath.Join(fixtures, "releases", "shop"), rel)
	evilJob(t, ws, "<%= 'a harmless template' %>")
	writeFile(t, filepath.Join(rel, "manifest.yml"), evilManifest+"variables:\n- {name: p, type: password}\n")
	code, out, took, rss := runHostile(t, rel, hostileTemplate("--output", "../out", "--vars-store", store), "")
	t.Logf("exit %d in %v, peak %d MiB:\n%s", code, took.Round(time.Millisecond), rss>>20, out)
	if code != 1 || !strings.Contains(out, "--vars-store "+store) || !strings.Contains(out, "no space left on device") {
		t.Errorf("exit %d, want 1 naming the store and the full disk:\n%s", code, out)
	}
	if data, err := os.ReadFile(store); err != nil || string(data) != previous {
		t.Errorf("the previous store changed (%v): %d bytes", err, len(data))
	}
	if _, err := os.Stat(filepath.Join(ws, "out")); err == nil {
		t.Error("a render was written with a password the store could not keep")
	}
	if entries, _ := os.ReadDir(disk); len(entries) != 2 {
		t.Errorf("the disk holds %d entries, want the store and the filler", len(entries))
	}
}

// TestSignalEndsBlockedRead sends SIGTERM to template blocked reading a
// FIFO given as --manifest, then as --vars-file: it ends at once, exit 1,
// naming the flag.
func TestSignalEndsBlockedRead(t *testing.T) {
	for _, flag := range []string{"--manifest", "--vars-file"} {
		t.Run(flag, func(t *testing.T) {
			t.Parallel()
			ws := t.TempDir()
			rel := filepath.Join(ws, "rel")
			copyDir(t, filepath.Join(fixtures, "releases", "shop"), rel)
			writeFile(t, filepath.Join(rel, "manifest.yml"), hostileBase)
			fifo := filepath.Join(ws, "fifo")
			if err := syscall.Mkfifo(fifo, 0o600); err != nil {
				t.Fatal(err)
			}
			args := hostileTemplate("--output", "../out", "--vars-file", "../vars.yml")
			writeFile(t, filepath.Join(ws, "vars.yml"), "{}\n")
			args = slicesReplace(args, map[string]string{"--manifest": "manifest.yml", "--vars-file": "../vars.yml"}[flag], fifo)
			cmd, out := startHostile(t, rel, args)
			// The CLI reads the FIFO once a writer may open it; the writer
			// stays open and silent, so the read blocks.
			var w *os.File
			for deadline := time.Now().Add(20 * time.Second); w == nil; {
				f, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0)
				switch {
				case err == nil:
					w = f
				case time.Now().After(deadline):
					t.Fatalf("the CLI never opened %s: %v\n%s", fifo, err, out)
				default:
					time.Sleep(10 * time.Millisecond)
				}
			}
			defer w.Close()
			sent := time.Now()
			if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			_ = cmd.Wait()
			took := time.Since(sent)
			t.Logf("exit %d %v after SIGTERM:\n%s", cmd.ProcessState.ExitCode(), took.Round(time.Millisecond), out)
			if code := cmd.ProcessState.ExitCode(); code != 1 || !strings.Contains(out.String(), flag+" "+fifo+": reading stopped") {
				t.Errorf("exit %d, want 1 naming %s:\n%s", code, flag, out)
			}
			if took > 5*time.Second {
				t.Errorf("took %v after SIGTERM", took)
			}
		})
	}
}

// startHostile starts the CLI in dir in a process of its own, as
// runHostile runs it.
func startHostile(t *testing.T, dir string, args []string) (*exec.Cmd, *strings.Builder) {
	t.Helper()
	cmd := hostileCommand(dir, args, "")
	out := &strings.Builder{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	return cmd, out
}
