// Package workspace holds Hangar's domain: workspace states, the transitions a user may ask for, and
// the per-agent configuration. It is pure: no SQL, no HTTP.
//
// The states and diagrams come from ../shared/seeds/workspaces-architecture-kubernetes.md
// ("Workspace states", "Possible desired_state values").
package workspace

import (
	"fmt"
	"strings"

	"github.com/hangar-dev/hangar/internal/errs"
)

// State is a workspace state. Actual states use all values but RestartRequested; desired states use only
// Running, Stopped, Terminated and RestartRequested.
type State string

const (
	CreationRequested State = "CreationRequested"
	Starting          State = "Starting"
	Running           State = "Running"
	Stopping          State = "Stopping"
	Stopped           State = "Stopped"
	Failed            State = "Failed"
	// Canceled is a Terraform workspace whose latest build was canceled: Terraform stopped after
	// the operations in progress, so the workspace is partly what its owner asked for. Nothing is
	// wrong with it: start, stop or delete it. (Coder's "canceled" status; the seed's states have
	// no word for it, as the Kubernetes backend cannot cancel.)
	Canceled         State = "Canceled"
	Error            State = "Error"
	RestartRequested State = "RestartRequested"
	Terminating      State = "Terminating"
	Terminated       State = "Terminated"
	Unknown          State = "Unknown"
)

// ActualStates lists every value actual_state may take. RestartRequested is desired-only.
var ActualStates = []State{CreationRequested, Starting, Running, Stopping, Stopped, Failed, Canceled, Error, Terminating, Terminated, Unknown}

// DesiredStates lists every value desired_state may take.
var DesiredStates = []State{Running, Stopped, Terminated, RestartRequested}

// ParseDesired parses a desired state named by a user or a stored row.
func ParseDesired(s string) (State, error) {
	for _, d := range DesiredStates {
		if string(d) == s {
			return d, nil
		}
	}
	return "", fmt.Errorf("unknown desired state %q: must be one of %s", s, join(DesiredStates))
}

// ParseActual parses a stored actual state.
func ParseActual(s string) (State, error) {
	for _, a := range ActualStates {
		if string(a) == s {
			return a, nil
		}
	}
	return "", fmt.Errorf("unknown actual state %q: must be one of %s", s, join(ActualStates))
}

func join(ss []State) string {
	parts := make([]string, len(ss))
	for i, s := range ss {
		parts[i] = string(s)
	}
	return strings.Join(parts, ", ")
}

// ErrTerminated is returned for any change asked of a workspace whose desired state is Terminated:
// termination is permanent.
var ErrTerminated = errs.New(errs.Conflict, "the workspace is terminated; termination is permanent")

// ErrIllegalTransition is returned for a desired-state change the domain refuses.
var ErrIllegalTransition = errs.New(errs.Conflict, "illegal desired state transition")

// CheckDesiredChange says whether a user may move a workspace from desired state `from` (with actual
// state `actual`) to desired state `to`.
//
// Rules (seed diagrams plus docs/decisions.md):
//   - Terminated is permanent: nothing follows it but Terminated again, which changes nothing (so
//     that a repeated delete succeeds).
//   - Running, Stopped and Terminated may be asked from any other desired state.
//   - RestartRequested may be asked only while the workspace is meant to run (desired Running or
//     already RestartRequested); restarting a stopped workspace is a start.
//   - Asking for the state it already has is accepted and changes nothing (idempotent).
func CheckDesiredChange(from, actual, to State) error {
	if from == Terminated {
		if to == Terminated {
			return nil
		}
		return ErrTerminated
	}
	switch to {
	case Running, Stopped, Terminated:
		return nil
	case RestartRequested:
		if from == Running || from == RestartRequested {
			return nil
		}
		return fmt.Errorf("%w: a restart needs desired state Running, the workspace is %s (start it instead)", ErrIllegalTransition, from)
	}
	return fmt.Errorf("%w: %q is not a desired state", ErrIllegalTransition, to)
}
