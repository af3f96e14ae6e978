package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"slices"
	"time"

	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// goal is what --wait waits for after a command set a desired state.
type goal struct {
	// describe completes "wait until the workspace is ...".
	describe string
	// actual is the actual state that ends the wait.
	actual workspace.State
	// desired lists the desired states the workspace may have while waiting; anything else means
	// someone (another user, the server's lifetime limits) changed it, and the goal is gone.
	desired []workspace.State
	// restart says the wait ends only once the server has turned desired RestartRequested back into
	// Running (when the agent reported Stopped) and the workspace runs again.
	restart bool
}

// goals maps the desired state a command sets to what --wait waits for.
var goals = map[workspace.State]goal{
	workspace.Running:          {describe: "Running", actual: workspace.Running, desired: []workspace.State{workspace.Running}},
	workspace.Stopped:          {describe: "Stopped", actual: workspace.Stopped, desired: []workspace.State{workspace.Stopped}},
	workspace.RestartRequested: {describe: "Running again", actual: workspace.Running, desired: []workspace.State{workspace.RestartRequested, workspace.Running}, restart: true},
	workspace.Terminated:       {describe: "Terminated", actual: workspace.Terminated, desired: []workspace.State{workspace.Terminated}},
}

// until returns the check WaitForState runs on each read of the workspace. start is the answer of
// the request that set the desired state.
func (g goal) until(start sdk.Workspace) func(sdk.Workspace) (bool, error) {
	restarted := start.DesiredState == string(workspace.RestartRequested)
	var cycles agentCycles
	return func(ws sdk.Workspace) (bool, error) {
		if ws.DesiredState == string(workspace.RestartRequested) {
			restarted = true
		}
		cycles.observe(ws)
		if err := failure(ws, cycles.acted); err != nil {
			return false, err
		}
		if !slices.Contains(g.desired, workspace.State(ws.DesiredState)) {
			return false, fmt.Errorf("the desired state of workspace %s changed to %s while waiting for it to be %s", ws.Name, ws.DesiredState, g.describe)
		}
		if g.restart && !(restarted && ws.DesiredState == string(workspace.Running)) {
			return false, nil
		}
		return ws.ActualState == string(g.actual), nil
	}
}

// failure returns an error when the workspace is Failed, Canceled or Error for its current desired
// state.
//
// A Failed or Error state recorded before the last desired-state change is what the agent reported
// about the previous desired state, so it does not end the wait until the agent has acted on the
// change: the server suppresses the agent's error in the first report after a change, and records
// the state's time only when the state changes, so an error that persists across the change keeps
// its old time. agentActed says the agent has reported since it was told of the change.
func failure(ws sdk.Workspace, agentActed bool) error {
	if ws.ActualState != string(workspace.Failed) && ws.ActualState != string(workspace.Canceled) && ws.ActualState != string(workspace.Error) {
		return nil
	}
	stale := ws.ActualStateUpdatedAt != nil && ws.DesiredStateUpdatedAt != nil && ws.ActualStateUpdatedAt.Before(*ws.DesiredStateUpdatedAt)
	if stale && !agentActed {
		return nil
	}
	if ws.Error != nil {
		return fmt.Errorf("workspace %s is %s: %s", ws.Name, ws.ActualState, formatWorkspaceError(ws.Error))
	}
	return fmt.Errorf("workspace %s is %s (the agent reported no error details)", ws.Name, ws.ActualState)
}

// agentCycles follows responded_to_agent_at across reads: the first answer to the agent after a
// desired-state change carries the change; a later answer means the agent reported again after
// acting on it.
type agentCycles struct {
	desiredAt   time.Time
	firstAnswer time.Time
	acted       bool
}

func (c *agentCycles) observe(ws sdk.Workspace) {
	if ws.DesiredStateUpdatedAt == nil || ws.RespondedToAgentAt == nil {
		return
	}
	d, r := *ws.DesiredStateUpdatedAt, *ws.RespondedToAgentAt
	if !d.Equal(c.desiredAt) {
		*c = agentCycles{desiredAt: d}
	}
	switch {
	case !r.After(d):
	case c.firstAnswer.IsZero():
		c.firstAnswer = r
	case r.After(c.firstAnswer):
		c.acted = true
	}
}

var errWaitTimeout = errors.New("wait timed out")

// wait polls the workspace until it reaches g, printing a line to progress on each state change.
// ctx ends the wait: its deadline is --timeout (cause errWaitTimeout), given by the caller so that
// the whole command shares it; timeout is that duration, for the message.
func (a *app) wait(ctx context.Context, c *sdk.Client, start sdk.Workspace, g goal, timeout time.Duration, progress io.Writer) (sdk.Workspace, error) {
	// Say at once when the workspace's agent is away, rather than wait silently until --timeout.
	if notice := a.agentNotice(ctx, c, start); notice != "" {
		fmt.Fprintf(progress, "Note: %s. Waiting up to %s.\n", notice, timeout)
	}
	// owner/name: an admin waiting on another user's workspace must not poll their own of that name.
	last, err := c.WaitForState(ctx, start.Ref(), g.until(start), func(ws sdk.Workspace) {
		line := fmt.Sprintf("%s  desired=%s  actual=%s", a.now().In(a.loc).Format("15:04:05"), ws.DesiredState, ws.ActualState)
		if ws.Error != nil {
			line += "  error=" + formatWorkspaceError(ws.Error)
		}
		if st := ws.RunningStep(); st != nil {
			line += "  " + st.Name
			if st.Detail != "" {
				line += ": " + printable(st.Detail)
			}
		}
		fmt.Fprintln(progress, line)
	}, a.pollInterval)
	if last.Name == "" {
		last = start
	}
	switch {
	case errors.Is(err, errWaitTimeout):
		msg := fmt.Sprintf("timed out after %s waiting for workspace %s to be %s (desired=%s actual=%s)", timeout, start.Name, g.describe, last.DesiredState, last.ActualState)
		// WaitForState retries unreachable servers and 5xx answers; say so if that is why.
		var ae *sdk.APIError
		var ue *url.Error
		if errors.As(err, &ae) {
			msg += "; the last read failed: " + ae.Error()
		} else if errors.As(err, &ue) {
			msg += "; the last read failed: " + ue.Error()
		} else if notice := a.agentNoticeAfter(ctx, c, start); notice != "" {
			msg += ": " + notice
		}
		return last, errors.New(msg)
	case errors.Is(err, context.Canceled):
		return last, fmt.Errorf("stopped waiting for workspace %s (desired=%s actual=%s); the change was made and goes on without the wait", start.Name, last.DesiredState, last.ActualState)
	}
	return last, err
}
