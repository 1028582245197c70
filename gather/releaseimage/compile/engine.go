package compile

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"strings"
	"syscall"
	"time"
)

// Paths of BOSH's compile environment, as the agent sets them up.
const (
	PackagesDir = "/var/vcap/packages"
	DataDir     = "/var/vcap/data"
	CompileDir  = DataDir + "/compile"
)

// Task is one package to compile: its unpacked source, where its
// (transitive) dependencies' compiled files are, and the empty directory
// receiving what the packaging script installs.
type Task struct {
	// Image is the stemcell image, pinned by digest.
	Image   string
	Name    string
	Version string
	Source  string
	// Dependencies maps a dependency's name to the directory of its compiled
	// files, to appear at /var/vcap/packages/<name>.
	Dependencies map[string]string
	Install      string
	// Output receives the script's output as it runs (may be nil).
	Output io.Writer
}

// Engine runs a package's packaging script in a container of the stemcell
// image with BOSH's compile environment. Podman is one; a Kubernetes Job
// can be another.
type Engine interface {
	Compile(ctx context.Context, t Task) error
}

// ScriptError is a packaging script that failed.
type ScriptError struct {
	Package  string
	ExitCode int
	// Tail is the last lines of the script's output.
	Tail string
}

func (e *ScriptError) Error() string {
	return fmt.Sprintf("package '%s': packaging script exited with code %d; its last lines:\n%s", e.Package, e.ExitCode, e.Tail)
}

// tailLines is how much of a failed script's output an error shows.
const tailLines = 20

// Podman runs packaging scripts with podman, each in a fresh container
// without network, the source and install directories bind-mounted and the
// dependencies mounted read-only.
type Podman struct {
	// Command is the podman executable; "podman" when empty.
	Command string
	// Insecure pulls the stemcell image from plain-HTTP or self-signed
	// registries.
	Insecure bool
	// Data, when set, is a host directory kept as /var/vcap/data from one
	// compile to the next, as a reused compilation VM keeps its ephemeral
	// disk: golang-release's compile.env keeps the Go build cache there,
	// so a release's Go packages compile the standard library once.
	Data string
}

// Compile implements Engine.
func (p Podman) Compile(ctx context.Context, t Task) error {
	compileTarget := path.Join(CompileDir, t.Name)
	installTarget := path.Join(PackagesDir, t.Name)
	args := []string{"run", "--rm", "--network=none", "--pull=missing", "--entrypoint", "bash",
		"-v", t.Source + ":" + compileTarget, "-w", compileTarget,
		"-v", t.Install + ":" + installTarget,
		"-e", "BOSH_COMPILE_TARGET=" + compileTarget,
		"-e", "BOSH_INSTALL_TARGET=" + installTarget,
		"-e", "BOSH_PACKAGE_NAME=" + t.Name,
		"-e", "BOSH_PACKAGE_VERSION=" + t.Version,
	}
	if p.Insecure {
		args = append(args, "--tls-verify=false")
	}
	if p.Data != "" {
		if err := os.MkdirAll(p.Data, 0o755); err != nil {
			return err
		}
		// podman mounts parents first: the compile target stays on top.
		args = append(args, "-v", p.Data+":"+DataDir)
	}
	for name, dir := range t.Dependencies {
		args = append(args, "-v", dir+":"+path.Join(PackagesDir, name)+":ro")
	}
	// As the agent runs it: bash -x packaging in the compile target.
	args = append(args, t.Image, "-x", "packaging")
	command := p.Command
	if command == "" {
		command = "podman"
	}
	var out bytes.Buffer
	var w io.Writer = &out
	if t.Output != nil {
		w = io.MultiWriter(&out, t.Output)
	}
	cmd := exec.CommandContext(ctx, command, args...)
	cmd.Stdout, cmd.Stderr = w, w
	// podman run passes signals on to the container: an interrupted build
	// stops its containers instead of leaving them running.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 30 * time.Second
	err := cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) && ctx.Err() == nil {
		return &ScriptError{Package: t.Name, ExitCode: exit.ExitCode(), Tail: tail(out.String(), tailLines)}
	}
	return err
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
