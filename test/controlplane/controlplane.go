// Package controlplane starts a real Kubernetes control plane for tests: etcd
// and kube-apiserver through controller-runtime's envtest, optionally
// kube-controller-manager beside them, and optionally a webhook registered
// with the apiserver and served from the test process. The binaries are built
// from source by `make testbin`; nothing here is a fake.
//
// Every child process is stopped by PID when the control plane stops, also when
// the start fails half way; and each runs under `setpriv --pdeathsig KILL`, so
// it dies with the test process even when that is killed or interrupted
// before cleanup could run.
package controlplane

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

// DefaultControllers are the kube-controller-manager controllers the suites
// need: workloads create pods, garbage collection follows owner references,
// and Services list their pods' addresses in EndpointSlices (what the
// cluster DNS answers for headless Services).
var DefaultControllers = []string{"statefulset-controller", "job-controller", "garbage-collector-controller", "endpointslice-controller"}

// Options say which parts of the control plane to start.
type Options struct {
	// ControllerManager starts kube-controller-manager with Controllers
	// (DefaultControllers when empty).
	ControllerManager bool
	Controllers       []string
	// Webhook registers webhook configurations (from files or objects) with
	// the apiserver; service references are rewritten to a local HTTPS URL
	// served with a generated CA (see WebhookServerOptions).
	Webhook envtest.WebhookInstallOptions
	// CRDDirectoryPaths are installed before the tests start.
	CRDDirectoryPaths []string
	// CertManager installs cert-manager's CRDs and runs its controller
	// (self-signed and CA issuers) and cainjector.
	CertManager bool
}

// ControlPlane is a running control plane.
type ControlPlane struct {
	// Config is an admin (system:masters) REST config for the apiserver.
	Config *rest.Config
	// Client is a controller-runtime client built from Config.
	Client client.Client
	// Env is the underlying envtest environment.
	Env *envtest.Environment
	// BinDir holds the control plane binaries.
	BinDir string
	// LogDir holds one log file per process.
	LogDir string

	workDir   string
	children  []*exec.Cmd
	logFiles  []*os.File
	stopOnce  sync.Once
	stopError error

	// viewer is the kubeconfig Visible runs kubectl with.
	viewer     string
	viewerErr  error
	viewerOnce sync.Once
}

// BinDir returns the directory holding the control plane binaries:
// KUBEBUILDER_ASSETS when set, else the cache directory `make testbin` builds
// into. It fails with instructions when the binaries are missing.
func BinDir() (string, error) {
	dir, err := TestbinDir()
	if err != nil {
		return "", err
	}
	for _, name := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kubectl", "helm",
		"cert-manager-controller", "cert-manager-cainjector", "cert-manager-crds"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			return "", fmt.Errorf("control plane binary %s not found in %s: run `make testbin` first (it builds etcd and Kubernetes from their Go modules)", name, dir)
		}
	}
	return dir, nil
}

// TestbinDir is where `make testbin` builds the test binaries:
// KUBEBUILDER_ASSETS when set, else what `make -s print-testbin` prints.
func TestbinDir() (string, error) {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		return dir, nil
	}
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	out, err := exec.Command("make", "-s", "-C", root, "print-testbin").Output()
	if err != nil {
		return "", fmt.Errorf("finding the test binaries with `make -s print-testbin`: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// RepoRoot is the root of this repository, found from this source file.
func RepoRoot() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("cannot locate the repository root")
	}
	return filepath.Abs(filepath.Join(filepath.Dir(file), "..", ".."))
}

// Start starts a control plane. On error everything already started is
// stopped again.
func Start(opts Options) (cp *ControlPlane, err error) {
	binDir, err := BinDir()
	if err != nil {
		return nil, err
	}
	workDir, err := os.MkdirTemp("", "bosh-injector-controlplane-")
	if err != nil {
		return nil, err
	}
	cp = &ControlPlane{BinDir: binDir, LogDir: filepath.Join(workDir, "logs"), workDir: workDir}
	defer func() {
		if err != nil {
			err = fmt.Errorf("%w%s", err, cp.logTails(40))
			_ = cp.Stop()
			cp = nil
		}
	}()
	if err := os.MkdirAll(cp.LogDir, 0o755); err != nil {
		return cp, err
	}

	// envtest gives the apiserver 5 s to create the default namespace once
	// healthy, which a machine loaded by the clusters beside it can miss:
	// a fresh start is tried then.
	for attempt := 1; ; attempt++ {
		if cp.Env, err = cp.environment(opts); err != nil {
			return cp, err
		}
		if cp.Config, err = cp.Env.Start(); err == nil {
			break
		}
		if attempt == 3 || !strings.Contains(err.Error(), "default namespace didn't register") {
			return cp, fmt.Errorf("starting etcd and kube-apiserver: %w", err)
		}
		_ = cp.Env.Stop()
	}
	if cp.Client, err = client.New(cp.Config, client.Options{}); err != nil {
		return cp, err
	}
	if opts.ControllerManager {
		controllers := opts.Controllers
		if len(controllers) == 0 {
			controllers = DefaultControllers
		}
		if err := cp.startControllerManager(controllers); err != nil {
			return cp, err
		}
	}
	if opts.CertManager {
		if err := cp.startCertManager(); err != nil {
			return cp, err
		}
	}
	return cp, nil
}

// wrap returns an executable that runs the named binary so that it gets
// SIGKILL when the test process dies. envtest runs the path it is given with
// its own flags (and with --help to discover them), so a wrapper script keeps
// envtest unaware of it.
func (cp *ControlPlane) wrap(name string) (string, error) {
	real := filepath.Join(cp.BinDir, name)
	path := filepath.Join(cp.workDir, "bin", name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", err
	}
	// The PID file lets RestartAPIServer find the process envtest started
	// (exec keeps the PID).
	script := fmt.Sprintf("#!/bin/sh\necho $$ > %s.pid\nexec setpriv --pdeathsig KILL -- %s \"$@\"\n", path, real)
	return path, os.WriteFile(path, []byte(script), 0o755)
}

func (cp *ControlPlane) logFile(name string) (*os.File, error) {
	f, err := os.Create(filepath.Join(cp.LogDir, name+".log"))
	if err == nil {
		cp.logFiles = append(cp.logFiles, f)
	}
	return f, err
}

func (cp *ControlPlane) startControllerManager(controllers []string) error {
	kubeconfig, err := cp.KubeconfigFile("kube-controller-manager")
	if err != nil {
		return err
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	exited, err := cp.startChild("kube-controller-manager",
		"--kubeconfig="+kubeconfig,
		"--authentication-kubeconfig="+kubeconfig,
		"--authorization-kubeconfig="+kubeconfig,
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(port),
		"--cert-dir="+filepath.Join(cp.workDir, "kube-controller-manager-certs"),
		"--controllers="+strings.Join(controllers, ","),
		"--use-service-account-credentials=false",
		// The suites create many pods quickly; the default client limits
		// would make the controllers the bottleneck.
		"--kube-api-qps=500", "--kube-api-burst=1000",
		"--concurrent-statefulset-syncs=10",
	)
	if err != nil {
		return err
	}
	return waitHealthy("kube-controller-manager", fmt.Sprintf("https://127.0.0.1:%d/healthz", port), exited, 30*time.Second)
}

func (cp *ControlPlane) startCertManager() error {
	kubeconfig, err := cp.KubeconfigFile("cert-manager")
	if err != nil {
		return err
	}
	if _, err := cp.startChild("cert-manager-controller", "--kubeconfig="+kubeconfig, "--v=2"); err != nil {
		return err
	}
	_, err = cp.startChild("cert-manager-cainjector", "--kubeconfig-path="+kubeconfig, "--v=2")
	return err
}

// KubeconfigFile writes an admin (system:masters) kubeconfig for user name,
// for components and tools such as kubectl, helm or bosh-injector itself, and
// returns its path.
func (cp *ControlPlane) KubeconfigFile(name string) (string, error) {
	user, err := cp.Env.AddUser(envtest.User{Name: name, Groups: []string{"system:masters"}}, cp.Config)
	if err != nil {
		return "", fmt.Errorf("%s credentials: %w", name, err)
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		return "", err
	}
	path := filepath.Join(cp.workDir, name+".kubeconfig")
	return path, os.WriteFile(path, kubeconfig, 0o600)
}

// startChild starts a binary from BinDir with its output in LogDir; the
// returned channel receives its exit.
func (cp *ControlPlane) startChild(name string, args ...string) (<-chan error, error) {
	path, err := cp.wrap(name)
	if err != nil {
		return nil, err
	}
	logFile, err := cp.logFile(name)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	cp.children = append(cp.children, cmd)
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	return exited, nil
}

// environment is the envtest environment of opts, its processes wrapped
// and logging into LogDir.
func (cp *ControlPlane) environment(opts Options) (*envtest.Environment, error) {
	env := &envtest.Environment{
		BinaryAssetsDirectory: cp.BinDir,
		WebhookInstallOptions: opts.Webhook,
		CRDDirectoryPaths:     slices.Clone(opts.CRDDirectoryPaths),
		ErrorIfCRDPathMissing: true,
		// envtest's 20 s is far less than an apiserver takes to start on a
		// machine loaded by the clusters beside it; a dead one still fails
		// at once (its process exits).
		ControlPlaneStartTimeout: 3 * time.Minute,
	}
	env.ControlPlane.Etcd = nil
	api := env.ControlPlane.GetAPIServer()
	var err error
	if api.Path, err = cp.wrap("kube-apiserver"); err != nil {
		return nil, err
	}
	if api.Out, err = cp.logFile("kube-apiserver"); err != nil {
		return nil, err
	}
	api.Err = api.Out
	etcdPath, err := cp.wrap("etcd")
	if err != nil {
		return nil, err
	}
	etcdLog, err := cp.logFile("etcd")
	if err != nil {
		return nil, err
	}
	env.ControlPlane.Etcd = &envtest.Etcd{Path: etcdPath, Out: etcdLog, Err: etcdLog}
	env.ControlPlane.KubectlPath = filepath.Join(cp.BinDir, "kubectl")
	if opts.CertManager {
		env.CRDDirectoryPaths = append(env.CRDDirectoryPaths, filepath.Join(cp.BinDir, "cert-manager-crds"))
	}
	return env, nil
}

// waitHealthy polls a component's /healthz until it answers 200, the process
// exits, or the timeout passes.
func waitHealthy(name, url string, exited <-chan error, timeout time.Duration) error {
	httpClient := &http.Client{
		Timeout: time.Second,
		// The component serves a self-signed certificate; only liveness is
		// checked here.
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, //nolint:gosec
	}
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
			return fmt.Errorf("%s exited during start: %v", name, err)
		default:
		}
		resp, err := httpClient.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("%s not healthy at %s after %s", name, url, timeout)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// RestartAPIServer kills kube-apiserver (SIGKILL, as a crash or a node
// failure would) and, after down has run, starts it again with the same
// flags on the same port; etcd and the other components keep running. It
// returns once the apiserver answers requests again.
func (cp *ControlPlane) RestartAPIServer(down func()) error {
	path := filepath.Join(cp.workDir, "bin", "kube-apiserver")
	data, err := os.ReadFile(path + ".pid")
	if err != nil {
		return err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		return fmt.Errorf("kube-apiserver PID file: %w", err)
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return fmt.Errorf("kube-apiserver flags: %w", err)
	}
	args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")[1:]
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("killing kube-apiserver: %w", err)
	}
	for processAlive(pid) {
		time.Sleep(20 * time.Millisecond)
	}
	down()
	logFile, err := cp.logFile("kube-apiserver-restarted")
	if err != nil {
		return err
	}
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("restarting kube-apiserver: %w", err)
	}
	cp.children = append(cp.children, cmd)
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	healthz, err := rest.RESTClientFor(withJSON(cp.Config))
	if err != nil {
		return err
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
			return fmt.Errorf("kube-apiserver exited during restart: %v", err)
		default:
		}
		if err := healthz.Get().AbsPath("/readyz").Do(context.Background()).Error(); err == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return errors.New("kube-apiserver not ready 30s after its restart")
}

func withJSON(c *rest.Config) *rest.Config {
	c = rest.CopyConfig(c)
	c.GroupVersion = &schema.GroupVersion{Version: "v1"}
	c.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	return c
}

// WebhookServerOptions are the options for a controller-runtime webhook server
// that the apiserver reaches through the webhook configurations installed
// from Options.Webhook.
func (cp *ControlPlane) WebhookServerOptions() webhook.Options {
	w := cp.Env.WebhookInstallOptions
	return webhook.Options{Host: w.LocalServingHost, Port: w.LocalServingPort, CertDir: w.LocalServingCertDir}
}

// Stop stops every process this control plane started, by PID. It is safe to
// call more than once.
func (cp *ControlPlane) Stop() error {
	cp.stopOnce.Do(func() {
		var errs []error
		for _, child := range cp.children {
			stopChild(child.Process.Pid)
		}
		if cp.Env != nil {
			if err := cp.Env.Stop(); err != nil {
				errs = append(errs, fmt.Errorf("stopping etcd and kube-apiserver: %w", err))
			}
		}
		for _, f := range cp.logFiles {
			_ = f.Close()
		}
		// Its logs were told on failure already.
		_ = os.RemoveAll(cp.workDir)
		cp.stopError = errors.Join(errs...)
	})
	return cp.stopError
}

// stopChild sends SIGTERM to a child's process group, then SIGKILL if it
// has not exited after a few seconds. The wrapper execs the binary, so the PID
// is the component's own.
func stopChild(pid int) {
	_ = syscall.Kill(-pid, syscall.SIGTERM)
	deadline := time.Now().Add(5 * time.Second)
	for processAlive(pid) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func processAlive(pid int) bool {
	// A reaped or zombie process is gone for our purpose.
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	fields := bytes.Fields(data[bytes.LastIndexByte(data, ')')+1:])
	return len(fields) > 0 && string(fields[0]) != "Z"
}

// Logs writes the last lines of each process's log to w.
func (cp *ControlPlane) Logs(w io.Writer, lines int) {
	fmt.Fprint(w, cp.logTails(lines))
}

func (cp *ControlPlane) logTails(lines int) string { return LogTails(cp.LogDir, lines) }

// LogTails are the last lines of each log file in dir, each under a
// heading naming it.
func LogTails(dir string, lines int) string {
	var b strings.Builder
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil || len(data) == 0 {
			continue
		}
		all := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		if len(all) > lines {
			all = all[len(all)-lines:]
		}
		fmt.Fprintf(&b, "\n--- last %d lines of %s ---\n%s\n", len(all), filepath.Join(dir, e.Name()), strings.Join(all, "\n"))
	}
	return b.String()
}

// Cleanup removes the control plane's working directory (logs included);
// call it after Stop when the logs are no longer needed.
func (cp *ControlPlane) Cleanup() error { return os.RemoveAll(cp.workDir) }
