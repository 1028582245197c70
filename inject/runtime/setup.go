package runtime

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/bosh-injector/bosh-injector/inject/runtime/contract"
)

// setupWait bounds how long an answer waits for the setup: less than the
// probe's timeout, so the kubelet hears "not yet" rather than a timeout.
const setupWait = contract.SetupProbeTimeout*time.Second - 5*time.Second

// ServeSetup answers the pod's readiness probe at contract.SetupPath on
// contract.SetupPort until ctx ends: 200 once the instance's setup in
// planDir ended, else, after waiting for it, 503 with what it still waits
// for. At contract.ReadyPath it answers the process containers' readiness
// probes from the launchers' files in stateDir, as their Ready does.
func ServeSetup(ctx context.Context, planDir, stateDir string) error {
	l, err := net.Listen("tcp", ":"+strconv.Itoa(contract.SetupPort))
	if err != nil {
		return fmt.Errorf("serving the setup probe: %w", err)
	}
	return serveSetup(ctx, l, planDir, stateDir, setupWait)
}

func serveSetup(ctx context.Context, l net.Listener, planDir, stateDir string, wait time.Duration) error {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+contract.ReadyPath, func(w http.ResponseWriter, r *http.Request) {
		if err := readyOf(r.Context(), planDir, stateDir, r.URL.Query()); err != nil {
			// The kubelet's Event of a failed HTTP probe shows only the
			// status; the deploy's verdict asks for this body.
			status := http.StatusServiceUnavailable
			if errors.As(err, new(Failed)) {
				status = contract.FailedStatus
			}
			http.Error(w, err.Error(), status)
			return
		}
		fmt.Fprintln(w, "running")
	})
	mux.HandleFunc("GET "+contract.SetupPath, func(w http.ResponseWriter, r *http.Request) {
		waitCtx, cancel := context.WithTimeout(r.Context(), wait)
		defer cancel()
		if err := contract.WaitSetup(waitCtx, planDir); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "the instance's setup ended")
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// readyOf is a process container's readiness, as its `probe ready` answers
// it, from outside the container: its launcher removes the pid file when
// the process exits, and a container not running is never ready.
func readyOf(ctx context.Context, planDir, stateDir string, query url.Values) error {
	budget := ReadyBudget
	if query.Has(contract.NoWait) {
		budget = 0
	}
	return WaitReady(ctx, planDir, budget, func() (Instance, error) {
		plan, err := contract.ReadyPlan(planDir, query)
		// A job's bin/dns/healthy runs in its own container, whose probe
		// stays an exec (inject's probeThroughSetup).
		if err == nil && contract.ChecksDNSHealth(plan.Jobs, plan.Container) {
			err = fmt.Errorf("container %q runs a job's bin/dns/healthy: its probe runs in it", plan.Container)
		}
		return Instance{Plan: plan, State: State{Dir: stateDir}, Outside: true}, err
	})
}
