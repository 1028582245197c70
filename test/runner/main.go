// Command runner is `make test`: it compiles every test binary of the
// module first, then runs them scheduled for the machine it is on, so that
// no compile competes with a running cluster and no more real-node clusters
// run at once than the cores carry (-clusters: two more than the cores, as
// a cluster's nodes mostly wait on their pods). Its output is go test's: `ok` and `FAIL`
// lines per package, a failed package's whole output, and a closing count.
//
//	go run ./test/runner [-cores N] [-clusters N] [-timeout 20m] [-packages "./..."] [-events dir] [-- go test build flags]
package main

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

func main() {
	// GOMAXPROCS follows a container's CPU quota.
	cores := flag.Int("cores", runtime.GOMAXPROCS(0), "cores the tests may use: as many packages without a cluster run at once")
	clusters := flag.Int("clusters", runtime.GOMAXPROCS(0)+2, "real-node clusters that may run at once (a package needing more runs alone)")
	timeout := flag.Duration("timeout", 20*time.Minute, "a test binary's -test.timeout")
	dir := flag.String("dir", "", "where test binaries are written (a temporary directory when empty)")
	packages := flag.String("packages", "./...", "the packages to test, as go list takes them (space-separated)")
	flag.StringVar(&eventsDir, "events", os.Getenv("TEST_EVENTS"), "a directory to keep every package's test2json events in (their times show where a run's time went)")
	flag.Parse()
	if err := run(strings.Fields(*packages), *cores, *clusters, *timeout, *dir, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "runner:", err)
		os.Exit(1)
	}
}

func run(patterns []string, cores, clusters int, timeout time.Duration, dir string, buildFlags []string) error {
	pkgs, err := list(patterns)
	if err != nil {
		return err
	}
	if dir == "" {
		if dir, err = os.MkdirTemp("", "bosh-injector-tests-"); err != nil {
			return err
		}
		defer os.RemoveAll(dir)
	}
	start := time.Now()
	// test2json is built and run itself, not through `go tool`, so a
	// timeout kills its process group, the test binary's too.
	test2json = filepath.Join(dir, "test2json")
	if out, err := exec.Command("go", "build", "-o", test2json, "cmd/test2json").CombinedOutput(); err != nil {
		return fmt.Errorf("building test2json: %w: %s", err, out)
	}
	compile(pkgs, dir, buildFlags)
	fmt.Printf("==> compiled %d test binaries in %s\n", len(pkgs), time.Since(start).Round(time.Second))
	results := schedule(pkgs, cores, clusters, func(p *pkg) result { return p.run(timeout) })
	var passed, failed, skipped int
	var failedPkgs []string
	for _, r := range results {
		passed, failed, skipped = passed+r.passed, failed+r.failed, skipped+r.skipped
		if !r.ok {
			failedPkgs = append(failedPkgs, r.pkg)
		}
	}
	fmt.Printf("==> %d packages in %s\n", len(results), time.Since(start).Round(time.Second))
	if len(failedPkgs) > 0 {
		fmt.Printf("failed packages: %s\n", strings.Join(failedPkgs, " "))
	}
	fmt.Printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped)
	if len(failedPkgs) > 0 {
		fmt.Println("FAIL")
		return errors.New("tests failed")
	}
	return nil
}

// test2json is the go tool's test2json binary.
var test2json string

// eventsDir, when set, keeps each package's test2json events, one file per
// package.
var eventsDir string

// pkg is a package with tests.
type pkg struct {
	ImportPath string
	Dir        string
	// binary is its compiled test binary.
	binary string
	// clusters is how many real-node clusters its tests run at once.
	clusters int
	// buildFailed is the compiler's output when its tests did not build.
	buildFailed string
}

const module = "github.com/bosh-injector/bosh-injector"

// clusterPackages are the packages whose tests start real-node clusters
// (test/cluster), by how many they run at once: the end-to-end tests
// run the shared cluster and TestZones' own beside it, the sandbox test
// the kept sandbox's and the broken one's.
var clusterPackages = map[string]int{
	"test/e2e":     2,
	"test/sandbox": 2,
	"test/demo":    1,
	"test/cluster": 1,
}

// longest are the packages that take longest, started first so that the
// run ends soonest; the rest follow in `go list` order. On two cores (four
// clusters) the end-to-end package's two clusters run throughout (450–480
// s), the sandbox's two beside them (about 205 s), then the demo's (265 s)
// and the cluster package's (20 s).
var longest = []string{"test/e2e", "test/sandbox", "test/demo", "test/cluster", "gather/releaseimage", "webhook", "gather/operator/runner"}

// list lists the module's packages with tests (the tools modules under
// test/tools are modules of their own).
func list(patterns []string) ([]*pkg, error) {
	out, err := exec.Command("go", append([]string{"list", "-json=ImportPath,Dir,TestGoFiles,XTestGoFiles"}, patterns...)...).Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %w", stderrOf(err))
	}
	var pkgs []*pkg
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p struct {
			pkg
			TestGoFiles, XTestGoFiles []string
		}
		if err := dec.Decode(&p); err != nil {
			return nil, err
		}
		if len(p.TestGoFiles)+len(p.XTestGoFiles) > 0 {
			q := p.pkg
			q.clusters = clusterPackages[relative(q.ImportPath)]
			pkgs = append(pkgs, &q)
		}
	}
	order := func(p *pkg) int {
		if i := slices.Index(longest, relative(p.ImportPath)); i >= 0 {
			return i
		}
		return len(longest)
	}
	slices.SortStableFunc(pkgs, func(a, b *pkg) int { return cmp.Compare(order(a), order(b)) })
	return pkgs, nil
}

// relative is a package's path in the module.
func relative(importPath string) string {
	return strings.TrimPrefix(strings.TrimPrefix(importPath, module), "/")
}

// compile builds every test binary with one go command per group of
// packages whose paths end differently (`go test -c -o dir/` names a
// binary after its import path's last element), so the compiler's
// parallelism spans the whole module.
func compile(pkgs []*pkg, dir string, buildFlags []string) {
	var groups [][]*pkg
	for _, p := range pkgs {
		placed := false
		for i, g := range groups {
			if !slices.ContainsFunc(g, func(q *pkg) bool { return path.Base(q.ImportPath) == path.Base(p.ImportPath) }) {
				groups[i] = append(g, p)
				placed = true
				break
			}
		}
		if !placed {
			groups = append(groups, []*pkg{p})
		}
	}
	for i, g := range groups {
		out := filepath.Join(dir, fmt.Sprint(i))
		args := append([]string{"test", "-c", "-o", out + "/"}, buildFlags...)
		for _, p := range g {
			args = append(args, p.ImportPath)
			p.binary = filepath.Join(out, path.Base(p.ImportPath)+".test")
		}
		cmd := exec.Command("go", args...)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if cmd.Run() == nil {
			continue
		}
		// As go test marks a package [build failed] and tests the rest:
		// each package of the group alone, so the others still run.
		for _, p := range g {
			one := exec.Command("go", append(append([]string{"test", "-c", "-o", p.binary}, buildFlags...), p.ImportPath)...)
			if out, err := one.CombinedOutput(); err != nil {
				p.buildFailed = fmt.Sprintf("%s\n%s", out, err)
			}
		}
	}
}

// schedule runs every package and returns their results in the order they
// ended. Cluster packages run while the clusters running leave room for
// theirs (at most maxClusters at once; one package alone may run more),
// the others cores at a time beside them; a package that does not fit waits and
// lets the ones behind it that do fit start first.
func schedule(pkgs []*pkg, cores, maxClusters int, run func(*pkg) result) []result {
	var mu sync.Mutex
	cond := sync.NewCond(&mu)
	clusters, others := 0, 0
	var results []result
	fits := func(p *pkg) bool {
		if p.clusters > 0 {
			return clusters == 0 || clusters+p.clusters <= maxClusters
		}
		return others < cores
	}
	take := func(p *pkg, n int) {
		if p.clusters > 0 {
			clusters += n * p.clusters
		} else {
			others += n
		}
	}
	var wg sync.WaitGroup
	pending := slices.Clone(pkgs)
	started := map[*pkg]time.Time{}
	// A line a minute says what is still running, and for how long.
	tick := time.NewTicker(time.Minute)
	done := make(chan struct{})
	defer func() { tick.Stop(); close(done) }()
	go func() {
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			mu.Lock()
			var running []string
			for p, t := range started {
				running = append(running, fmt.Sprintf("%s (%s)", relative(p.ImportPath), time.Since(t).Round(time.Second)))
			}
			slices.Sort(running)
			if len(running) > 0 {
				fmt.Printf("    still running: %s; %d to start\n", strings.Join(running, ", "), len(pending))
			}
			mu.Unlock()
		}
	}()
	mu.Lock()
	for len(pending) > 0 {
		i := slices.IndexFunc(pending, fits)
		if i < 0 {
			cond.Wait()
			continue
		}
		p := pending[i]
		pending = slices.Delete(pending, i, i+1)
		take(p, 1)
		started[p] = time.Now()
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := run(p)
			mu.Lock()
			defer mu.Unlock()
			take(p, -1)
			delete(started, p)
			results = append(results, r)
			r.print(os.Stdout)
			cond.Broadcast()
		}()
	}
	mu.Unlock()
	wg.Wait()
	return results
}

// result is one package's outcome.
type result struct {
	pkg                     string
	ok                      bool
	elapsed                 time.Duration
	passed, failed, skipped int
	output                  []string
	// tests are the top-level tests' times, for a long package's
	// slowest.
	tests map[string]float64
}

func (r result) print(w io.Writer) {
	if r.ok {
		fmt.Fprintf(w, "ok  \t%s\t%.3fs%s\n", r.pkg, r.elapsed.Seconds(), r.slowest())
		return
	}
	for _, l := range r.output {
		fmt.Fprint(w, l)
	}
	fmt.Fprintf(w, "FAIL\t%s\t%.3fs\n", r.pkg, r.elapsed.Seconds())
}

// slowest names a package's three slowest tests when it took over a
// minute: where a long run's time went.
func (r result) slowest() string {
	if r.elapsed < time.Minute || len(r.tests) < 2 {
		return ""
	}
	names := slices.SortedFunc(maps.Keys(r.tests), func(a, b string) int { return cmp.Compare(r.tests[b], r.tests[a]) })
	var parts []string
	for _, n := range names[:min(3, len(names))] {
		parts = append(parts, fmt.Sprintf("%s %.0fs", n, r.tests[n]))
	}
	return " (slowest: " + strings.Join(parts, ", ") + ")"
}

// event is one of test2json's events.
type event struct {
	Action string
	Test   string
	Output string
}

// run runs the package's test binary in its directory, as go test does,
// through test2json to count its tests.
func (p *pkg) run(timeout time.Duration) result {
	start := time.Now()
	r := result{pkg: p.ImportPath}
	if p.buildFailed != "" {
		r.failed, r.output = 1, []string{p.buildFailed + "\n", "[build failed]\n"}
		return r
	}
	// -test.timeout does not bound a TestMain's teardown: past the timeout
	// and a minute, the binary and what it started (one process group)
	// are killed.
	ctx, cancel := context.WithTimeout(context.Background(), timeout+time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, test2json, "-t", "-p", p.ImportPath, p.binary,
		"-test.v=test2json", "-test.count=1", "-test.timeout="+timeout.String(), "-test.paniconexit0")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	cmd.Dir = p.Dir
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	var events io.Reader = stdout
	if err == nil && eventsDir != "" {
		var f *os.File
		if f, err = os.Create(filepath.Join(eventsDir, strings.ReplaceAll(relative(p.ImportPath), "/", "_")+".json")); err == nil {
			defer f.Close()
			events = io.TeeReader(stdout, f)
		}
	}
	if err == nil {
		err = cmd.Start()
	}
	if err != nil {
		r.output = append(r.output, err.Error()+"\n")
		return r
	}
	sc := bufio.NewScanner(events)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	started := map[string]time.Time{}
	for sc.Scan() {
		var e event
		if json.Unmarshal(sc.Bytes(), &e) != nil {
			r.output = append(r.output, sc.Text()+"\n")
			continue
		}
		if e.Output != "" {
			r.output = append(r.output, e.Output)
		}
		if e.Test == "" || strings.Contains(e.Test, "/") {
			continue
		}
		switch e.Action {
		case "pass":
			r.passed++
		case "fail":
			r.failed++
		case "skip":
			r.skipped++
		}
		// test2json tells no times of a binary's own framing: a test runs
		// from its start, or its continuing after a pause, to its end.
		switch e.Action {
		case "run", "cont":
			started[e.Test] = time.Now()
		case "pass", "fail":
			if r.tests == nil {
				r.tests = map[string]float64{}
			}
			r.tests[e.Test] = time.Since(started[e.Test]).Seconds()
		}
	}
	err = cmd.Wait()
	r.elapsed = time.Since(start)
	r.ok = err == nil && r.failed == 0
	if err != nil && r.failed == 0 {
		// A binary that failed outside any test (TestMain, a timeout's
		// panic, a crash) counts as one failure.
		r.failed++
		r.output = append(r.output, fmt.Sprintf("%s: %v\n", path.Base(p.binary), err))
	}
	return r
}

func stderrOf(err error) error {
	var exit *exec.ExitError
	if errors.As(err, &exit) && len(exit.Stderr) > 0 {
		return fmt.Errorf("%w: %s", err, exit.Stderr)
	}
	return err
}
