package runtime

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"time"

	"github.com/bosh-injector/bosh-injector/inject/runtime/contract"
)

// Errand runs a job's bin/run as the agent's run_errand does: no
// arguments, the caller's environment (the agent's) with the agent's PATH,
// the caller's user (root in an errand container) and working directory,
// output on Out and Err only (the agent hands it to the director, no log
// file). It returns bin/run's exit status.
func (s Scripts) Errand(ctx context.Context, job string) (int, error) {
	cmd := exec.CommandContext(ctx, s.path(job, contract.Run))
	cmd.Env = append(os.Environ(), "PATH="+agentPath)
	cmd.Stdout, cmd.Stderr = s.Out, s.Err
	cmd.WaitDelay = time.Second
	err := runChild(cmd)
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit) && exit.ExitCode() >= 0:
		return exit.ExitCode(), nil
	case err != nil:
		return 1, fmt.Errorf("errand %s: %w", job, err)
	}
	return 0, nil
}
