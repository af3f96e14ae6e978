// Package backend is the one interface through which Hangar changes a workspace's desired state,
// whatever runs it: the Kubernetes service (package backend/kube: an agent applies the change) or
// the Terraform service (package backend/tfbackend: the change becomes a build). The server's
// handlers, the lifecycle executor (package autobuild) and, later, the prebuild reconciler call it.
package backend

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hangar-dev/hangar/internal/audit"
	"github.com/hangar-dev/hangar/internal/build"
	"github.com/hangar-dev/hangar/internal/errs"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// Change is a change of a workspace's desired state.
type Change struct {
	// To is the desired state; "" changes nothing.
	To workspace.State
	// Reason says why, for an automated change ("autostop: ..."); "" is a user's own request.
	Reason string
	// BuildReason is the reason a Terraform build records (build.ReasonInitiator when empty).
	BuildReason build.Reason
	// Dormant marks the workspace dormant with the change (dormancy).
	Dormant bool
	// LogLevel is the Terraform log level of the builds the change makes ("" or build.LogDebug);
	// a workspace an agent runs refuses any.
	LogLevel string
	// Use, when set, is the time of a use of the workspace by whoever asks: recorded with the
	// change, in its transaction, when that is the owner (what autostop and dormancy count from;
	// an admin's change is not the owner's use), whether or not the state changes.
	Use *time.Time
}

// ErrOtherBackend is a workspace a service was asked to change that another backend runs. The
// service changed nothing; Router tries the other.
var ErrOtherBackend = errs.New(errs.Conflict, "the workspace is run by another backend")

// Decide returns the change to make, given the workspace's row as it is locked inside the change's
// transaction and whether a build of it is queued or running (busy). Deciding on the locked row is
// what makes an automated change happen once when several replicas decide at the same time: the
// second finds the first's change and decides nothing.
type Decide func(w workspace.Workspace, busy bool) (Change, error)

// To is the Decide of a user's request: the state to, whatever the row.
func To(to workspace.State) Decide {
	return func(workspace.Workspace, bool) (Change, error) { return Change{To: to}, nil }
}

// AuditChange adds a desired-state change to the pending audit entry: from, to and the reason.
func AuditChange(entry *audit.Pending, cur workspace.Workspace, c Change) {
	entry.Set("from", string(cur.DesiredState))
	entry.Set("to", string(c.To))
	if c.Reason != "" {
		entry.Set("reason", c.Reason)
	}
	if c.Dormant {
		entry.Set("dormant", true)
	}
}

// Service is one backend's use cases.
type Service interface {
	// SetDesired changes the desired state of the workspace ref names as decide says, on behalf of
	// by (a user, or the automation's system user). A workspace by may not see is ErrHidden; a change
	// the state rules refuse wraps workspace.ErrIllegalTransition or workspace.ErrTerminated.
	// Asking for what the workspace already is, or is becoming, changes nothing.
	SetDesired(ctx context.Context, by workspace.User, ref store.WorkspaceRef, decide Decide) (workspace.Workspace, error)
}

// ErrHidden is a workspace the caller may not see: answered as "not found".
var ErrHidden = errs.New(errs.NotFound, "workspace not visible to the caller")

// Router sends each change to the service of the workspace's backend.
type Router struct {
	Store      store.Store
	Kubernetes Service
	Terraform  Service
}

// For returns the service of backend kind.
func (r Router) For(kind string) (Service, error) {
	switch kind {
	case workspace.KindKubernetes, "":
		return r.Kubernetes, nil
	case workspace.KindTerraform:
		if r.Terraform == nil {
			return nil, fmt.Errorf("no terraform backend in this server")
		}
		return r.Terraform, nil
	}
	return nil, fmt.Errorf("unknown backend %q", kind)
}

// SetDesired reads which backend runs the workspace (a workspace never changes backend, so this
// read needs no lock) and hands the change to that backend's service.
func (r Router) SetDesired(ctx context.Context, by workspace.User, ref store.WorkspaceRef, decide Decide) (workspace.Workspace, error) {
	// Most changes are of Kubernetes workspaces (users' and the load's): their service is tried
	// first, and its transaction reads the row by ref, locked, and gives it up at once when another
	// backend runs it. So a change of a Kubernetes workspace reads its row once, where a read to
	// choose the service first cost a round trip to the database on every change; a Terraform
	// workspace's change pays one short transaction more, next to a build of seconds.
	w, err := r.Kubernetes.SetDesired(ctx, by, ref, decide)
	if !errors.Is(err, ErrOtherBackend) {
		return w, err
	}
	svc, err := r.For(w.Backend)
	if err != nil {
		return w, err
	}
	return svc.SetDesired(ctx, by, store.WorkspaceRef{ID: w.ID}, decide)
}
