package server

import (
	"net/http"
	"slices"

	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/reconcile"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// helperStartupStep serves PUT protocol.StartupStepPath: a workspace's helper reports, with its
// token, a startup step it runs (its postStart commands), as the agent reports those of the pod
// (docs/decisions.md, "Startup steps"). Shown with the workspace's other steps.
func (s *Server) helperStartupStep(w http.ResponseWriter, r *http.Request) {
	if err := s.helperStartupStepErr(w, r); err != nil {
		s.fail(w, r, err)
	}
}

func (s *Server) helperStartupStepErr(w http.ResponseWriter, r *http.Request) error {
	ws, _, err := s.helperOf(r)
	if err != nil {
		return err
	}
	var req protocol.StartupStep
	// JSON may spell each byte of the log as a six-byte escape.
	if err := decodeJSON(w, r, 6*protocol.MaxStepLogBytes+(64<<10), &req); err != nil {
		return err
	}
	v := &workspace.ValidationError{}
	if !slices.Contains(protocol.HelperSteps, req.Name) {
		v.Add("name", "must be one of %q, got %q", protocol.HelperSteps, clip(req.Name))
	}
	reconcile.ValidateStep(v, "", req)
	if err := v.Err(); err != nil {
		return err
	}
	st := workspace.StartupStep{Name: req.Name, Position: slices.Index(protocol.StartupStepOrder, req.Name), State: req.State,
		StartedAt: workspace.InUTC(req.StartedAt), EndedAt: workspace.InUTC(req.EndedAt), Detail: req.Detail, Log: req.Log, UpdatedAt: s.clock.Now()}
	if err := s.store.SetWorkspaceStartupStep(r.Context(), ws.ID, st); err != nil {
		return err
	}
	s.log.Debug("startup step reported", "workspace", ws.ID, "step", req.Name, "state", req.State)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// startupStepsOf is what a workspace shows of its startup steps: the latest report of each, from
// its agent or its helper (nil when there is none, or when they cannot be read: the rest of the
// answer stands), and the step that failed while the workspace runs ("" none: "Running, startup
// failed"). A step still pending or running when the workspace no longer starts (stopped
// mid-build, or failed at an earlier step) was never finished: its pod is gone or will not go on,
// and the agent reports no steps of a pod being deleted. It shows as "interrupted" (it had
// started) or "skipped". The helper's steps run once the workspace runs: they are shown as
// reported while it does, and only those reported since the workspace was last started or
// updated (its desired state's time): a definition without postStart commands no longer shows
// the failure of an earlier one.
func (s *Server) startupStepsOf(r *http.Request, ws workspace.Workspace, dotfiles *sdk.WorkspaceDotfiles) (steps []sdk.WorkspaceStartupStep, failed string) {
	stored, err := s.store.WorkspaceStartupSteps(r.Context(), ws.ID)
	if err != nil {
		s.log.Warn("cannot read a workspace's startup steps", "workspace", ws.OwnerName+"/"+ws.Name, "err", err)
		return nil, ""
	}
	if st, ok := dotfilesStep(dotfiles); ok {
		stored = append(stored, st)
	}
	starting := ws.ActualState == workspace.CreationRequested || ws.ActualState == workspace.Starting || ws.ActualState == workspace.Unknown
	running := ws.ActualState == workspace.Running
	for _, st := range stored {
		helper := slices.Contains(protocol.HelperSteps, st.Name) || st.Name == protocol.StepDotfiles
		if helper && st.UpdatedAt.Before(ws.DesiredStateUpdatedAt) {
			continue // of an earlier start: a new start (or update) runs them again, if any
		}
		state := st.State
		switch {
		case starting, running && helper:
		case state == protocol.StepRunning:
			state = sdk.StepInterrupted
		case state == protocol.StepPending:
			state = sdk.StepSkipped
		}
		// Only a step that runs with the workspace can have failed while it runs: an init
		// container's failure while the pod runs is an earlier pod's (an update removed it).
		if running && helper && state == protocol.StepFailed && failed == "" {
			failed = st.Name
		}
		steps = append(steps, sdk.WorkspaceStartupStep{Name: st.Name, State: state, StartedAt: st.StartedAt, EndedAt: st.EndedAt,
			Detail: st.Detail, Log: st.Log, UpdatedAt: st.UpdatedAt})
	}
	return steps, failed
}

// dotfilesStep is the install of the owner's dotfiles as a startup step: the helper's latest
// report of it (none: ok false).
func dotfilesStep(d *sdk.WorkspaceDotfiles) (workspace.StartupStep, bool) {
	if d == nil || d.UpdatedAt == nil {
		return workspace.StartupStep{}, false
	}
	state, ok := map[string]string{protocol.DotfilesInstalling: protocol.StepRunning, protocol.DotfilesInstalled: protocol.StepDone,
		protocol.DotfilesFailed: protocol.StepFailed}[d.Status]
	if !ok {
		return workspace.StartupStep{}, false
	}
	detail := d.Repository
	if d.Script != "" {
		detail += " (" + d.Script + ")"
	}
	log := d.Log
	if d.Error != "" {
		log += d.Error + "\n"
	}
	return workspace.StartupStep{Name: protocol.StepDotfiles, Position: slices.Index(protocol.StartupStepOrder, protocol.StepDotfiles), State: state,
		Detail: detail, Log: log, UpdatedAt: *d.UpdatedAt}, true
}
