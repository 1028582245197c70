package runtime

import (
	"github.com/bosh-injector/bosh-injector/inject/runtime/contract"
)

// Status is the instance as its launchers recorded it in the state
// directory: each process container's state and the lifecycle scripts
// that failed. A process whose container is not running any more cannot
// be told apart here from one that exited (failing); the caller looks at
// the containers too. A process started again in its container says how
// many times and its last exit.
func (in Instance) Status(setup bool) contract.Status {
	st := contract.Status{Setup: setup}
	for _, c := range in.Plan.Containers {
		ps := contract.ProcessStatus{Container: c, State: in.processState(c, setup)}
		if rec, ok := in.exitOf(c); ok {
			ps.Restarts, ps.LastExit = rec.Restarts, &rec.LastExit
		}
		st.Processes = append(st.Processes, ps)
	}
	for _, j := range in.Plan.Jobs {
		if !j.Has(contract.PostStart) {
			continue
		}
		if record, failed := in.State.Read(failedFile(contract.PostStart, j.Name)); failed {
			st.Failed = append(st.Failed, contract.ScriptFailure{Job: j.Name, Script: contract.PostStart, Message: failure(record, true)})
		} else if _, ok := in.State.Read(okFile(contract.PostStart, j.Name)); !ok {
			st.Pending = append(st.Pending, j.Name)
		}
	}
	return st
}

// processState is a container's process state from its launcher's files:
// a pid runs once it lived StartCheck, a starting mark is a start in progress (also before the
// setup ended), a stopped mark a stop; none is a process that exited.
func (in Instance) processState(container string, setup bool) string {
	if age, ok := in.State.Age(pidFile(container)); ok {
		if age < StartCheck {
			return contract.StateStarting
		}
		return contract.StateRunning
	}
	if _, ok := in.State.Read(startingFile(container)); ok || !setup {
		return contract.StateStarting
	}
	if _, ok := in.State.Read(stoppedFile(container)); ok {
		return contract.StateStopped
	}
	return contract.StateFailing
}
