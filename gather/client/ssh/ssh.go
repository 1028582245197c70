// Package ssh is `bosh ssh` on a deployment the operator runs: a shell, or
// a command, in an instance's first process container, through an exec
// with the user's credentials (no SSH server, no gateway), its exit status
// carried past a cut exec (exit.go).
package ssh

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/bosh-injector/bosh-injector/gather/client/cluster"
	"github.com/bosh-injector/bosh-injector/gather/client/day2"
	"github.com/bosh-injector/bosh-injector/inject/runtime/contract"
)

// Run runs command (a login shell when empty) in the instance's first
// process container as vcap, or root, as `bosh ssh` gives a shell as a
// user with sudo; it returns the command's exit status, ErrCut with an
// error when that never arrived (see exit.go).
func Run(ctx context.Context, d *day2.Deployment, in day2.Instance, root bool, command string, s cluster.Streams) (int, error) {
	container, err := day2.FirstProcess(in.Pod)
	if err != nil {
		return 0, d.Unreachable(in, "ssh into it", err)
	}
	cmd := []string{contract.Binary, contract.Shell}
	if root {
		cmd = append(cmd, "--root")
	}
	var trailer *exitTrailer
	if command != "" {
		trailer = &exitTrailer{w: cmp.Or[io.Writer](s.Stderr, io.Discard)}
		cmd = append(cmd, "-c", withExitStatus(command))
		s.Stderr = trailer
	}
	err = d.Exec(ctx, in.Pod, container, cmd, s)
	var exit interface{ ExitStatus() int }
	switch {
	case trailer != nil && !trailer.seen:
		_ = trailer.flush()
		return ErrCut, fmt.Errorf("ssh into instance '%s' (pod %s, container %s): the command's exit status never arrived (%v), so its output may be cut: "+
			"its container may have stopped (see `kubectl describe pod %s`); run it again", in.Name(), in.Pod.Name, container, cmp.Or[any](err, "the exec's streams ended early"), in.Pod.Name)
	case errors.As(err, &exit):
		return exit.ExitStatus(), nil
	case err != nil:
		return 0, fmt.Errorf("ssh into instance '%s' (pod %s, container %s): %w", in.Name(), in.Pod.Name, container, err)
	case trailer != nil:
		return trailer.code, nil
	}
	return 0, nil
}
