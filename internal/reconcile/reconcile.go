// Package reconcile holds the seed's decision rules as pure functions: given the stored rows of an
// agent's workspaces, what the agent reported, and the time, it says what to write and what to answer.
// No I/O happens here; the server reads and writes around it in one transaction.
//
// Sources: ../shared/seeds/workspace-reconciliation-logic.md (which workspaces are answered, when
// config_to_apply and deployment_resource_version are sent, responded_to_agent_at),
// workspaces-architecture-kubernetes.md (full vs partial, RestartRequested), tracking-applier-errors.md
// ("Changes in Rails"), and docs/decisions.md where the seeds are silent or contradict themselves.
package reconcile

import (
	"sort"
	"time"

	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// Input is one reconcile request with the rows it concerns.
type Input struct {
	UpdateType protocol.UpdateType
	// Rows are the agent's workspaces in the request's scope (store.ReconcileScope): for partial, those
	// never answered or changed since the last answer; for full, all not fully terminated; in both
	// cases, plus every workspace the agent reported.
	Rows  []workspace.Workspace
	Infos []protocol.WorkspaceAgentInfo
	Now   time.Time
}

// Item is one workspace of the answer.
type Item struct {
	Workspace workspace.Workspace // as written
	// IncludeConfig says config_to_apply must be generated for this workspace.
	IncludeConfig bool
}

// Orphan is a workspace the agent reported that the server does not know for this agent. It is
// answered with desired state Terminated, so the agent deletes it.
type Orphan struct {
	Info        protocol.WorkspaceAgentInfo
	ActualState workspace.State
}

// Output is what to write and what to answer.
type Output struct {
	Changed []workspace.Workspace
	Items   []Item
	Orphans []Orphan
	// Transitions lists the state changes this report caused, for the log.
	Transitions []Transition
}

// Transition is one change of a workspace's actual or desired state.
type Transition struct {
	Workspace string // its name
	Owner     string // its owner's username
	Field     string // "actual_state" or "desired_state"
	From, To  workspace.State
}

// ChangedSinceResponse reports whether a workspace's desired state changed after the server last
// answered the agent about it (or it was never answered): the condition for sending config_to_apply.
// The seed writes it `desired_state_updated_at >= responded_to_agent_at`; Hangar compares strictly
// and stamps every user change strictly after the last response (see docs/decisions.md, "Strict
// comparison"), which is the same for every user action and right for the restart row at 05:07.
func ChangedSinceResponse(w workspace.Workspace) bool {
	return w.RespondedToAgentAt == nil || w.DesiredStateUpdatedAt.After(*w.RespondedToAgentAt)
}

// UserChangeTime is the time to stamp on a desired-state change a user makes at now: now, or just
// after the last response if the clock says otherwise (clock skew between replicas, or a change in
// the same microsecond as a response), so that the change is never taken as already answered.
func UserChangeTime(w workspace.Workspace, now time.Time) time.Time {
	if w.RespondedToAgentAt != nil && !now.After(*w.RespondedToAgentAt) {
		return w.RespondedToAgentAt.Add(time.Microsecond)
	}
	return now
}

// Decide applies the rules. The agent names a workspace by its cluster name and namespace
// (workspace.Workspace.KubeName, unique in the cluster): two owners' workspaces of one name never mix.
func Decide(in Input) Output {
	type key struct{ name, namespace string }
	reported := make(map[key]protocol.WorkspaceAgentInfo, len(in.Infos))
	for _, info := range in.Infos {
		reported[key{info.Name, info.Namespace}] = info
	}
	known := make(map[key]bool, len(in.Rows))

	var out Output
	for _, row := range in.Rows {
		k := key{row.KubeName, row.Namespace}
		known[k] = true
		info, wasReported := reported[k]
		changedBefore := ChangedSinceResponse(row)

		next := row
		if wasReported {
			applyReport(&next, info, !changedBefore, in.Now)
		}
		// Restart: RestartRequested lasts until the agent reports Stopped, then becomes Running with
		// a new desired_state_updated_at, so that the config goes out again
		// (workspaces-architecture-kubernetes.md, "Possible desired_state values").
		if wasReported && next.DesiredState == workspace.RestartRequested && next.ActualState == workspace.Stopped {
			next.DesiredState = workspace.Running
			next.DesiredStateUpdatedAt = in.Now
		}

		if next.ActualState != row.ActualState {
			out.Transitions = append(out.Transitions, Transition{row.Name, row.OwnerName, "actual_state", row.ActualState, next.ActualState})
		}
		if next.DesiredState != row.DesiredState {
			out.Transitions = append(out.Transitions, Transition{row.Name, row.OwnerName, "desired_state", row.DesiredState, next.DesiredState})
		}
		fullyTerminated := next.DesiredState == workspace.Terminated && next.ActualState == workspace.Terminated
		var include bool
		switch in.UpdateType {
		case protocol.UpdateFull:
			include = wasReported || !fullyTerminated
		default:
			include = wasReported || changedBefore
		}
		if !include {
			continue
		}
		// config_to_apply: decided on the rows as they were before this report, except that the
		// server's own restart flip counts (the seed's restart table sends config at 05:05). A full
		// reconcile also repairs drift: it re-sends the config of a workspace the agent no longer has
		// or whose Deployment has the wrong replica count (docs/decisions.md, "Full reconcile repairs drift").
		includeConfig := row.RespondedToAgentAt == nil || next.DesiredStateUpdatedAt.After(*row.RespondedToAgentAt) ||
			(in.UpdateType == protocol.UpdateFull && next.DesiredState != workspace.Terminated && drifted(next, info, wasReported))
		responded := in.Now
		next.RespondedToAgentAt = &responded
		out.Changed = append(out.Changed, next)
		out.Items = append(out.Items, Item{Workspace: next, IncludeConfig: includeConfig})
	}
	for _, info := range in.Infos {
		if known[key{info.Name, info.Namespace}] {
			continue
		}
		st, ok := ReportedState(info, true)
		if !ok {
			st = workspace.Unknown
		}
		out.Orphans = append(out.Orphans, Orphan{Info: info, ActualState: st})
	}
	sort.Slice(out.Items, func(i, j int) bool { return out.Items[i].Workspace.KubeName < out.Items[j].Workspace.KubeName })
	sort.Slice(out.Orphans, func(i, j int) bool { return out.Orphans[i].Info.Name < out.Orphans[j].Info.Name })
	return out
}

// WantedReplicas is the replica count of a workspace's Deployment for a desired state.
func WantedReplicas(desired workspace.State) int32 {
	if desired == workspace.Running {
		return 1
	}
	return 0
}

// drifted reports whether what the agent has for a workspace contradicts its desired state: the
// agent did not report it at all, or its Deployment has the wrong replica count.
func drifted(w workspace.Workspace, info protocol.WorkspaceAgentInfo, reported bool) bool {
	if !reported {
		return true
	}
	d := info.LatestK8sDeploymentInfo
	if d == nil || d.Spec == nil || d.Spec.Replicas == nil {
		return info.TerminationProgress == ""
	}
	return *d.Spec.Replicas != WantedReplicas(w.DesiredState)
}

// applyReport folds one agent report into a row.
func applyReport(w *workspace.Workspace, info protocol.WorkspaceAgentInfo, errorAllowed bool, now time.Time) {
	if d := info.LatestK8sDeploymentInfo; d != nil {
		rv := d.Metadata.ResourceVersion
		w.DeploymentResourceVersion = &rv
	}
	st, ok := ReportedState(info, errorAllowed)
	if !ok {
		return
	}
	w.ErrorType, w.ErrorMessage = "", ""
	switch st {
	case workspace.Error:
		w.ErrorType, w.ErrorMessage = info.ErrorDetails.ErrorType, info.ErrorDetails.ErrorMessage
	case workspace.Failed:
		if typ, msg, ok := FailureReason(info); ok {
			w.ErrorType, w.ErrorMessage = typ, msg
		}
	}
	if st != w.ActualState {
		w.ActualState = st
		t := now
		w.ActualStateUpdatedAt = &t
	}
}

// Response builds the wire answer from a decision; config returns the config_to_apply of a workspace.
func Response(out Output, settings protocol.Settings, imagePullSecrets []protocol.ImagePullSecret, config func(workspace.Workspace) (string, error)) (protocol.ReconcileResponse, error) {
	resp := protocol.ReconcileResponse{
		WorkspaceRailsInfos: make([]protocol.WorkspaceRailsInfo, 0, len(out.Items)+len(out.Orphans)),
		Settings:            settings,
	}
	if imagePullSecrets == nil {
		imagePullSecrets = []protocol.ImagePullSecret{}
	}
	for _, it := range out.Items {
		w := it.Workspace
		info := protocol.WorkspaceRailsInfo{
			Name:             w.KubeName,
			Namespace:        w.Namespace,
			DesiredState:     string(w.DesiredState),
			ActualState:      string(w.ActualState),
			ImagePullSecrets: imagePullSecrets,
		}
		if w.DeploymentResourceVersion != nil {
			info.DeploymentResourceVersion = *w.DeploymentResourceVersion
		}
		if it.IncludeConfig {
			cfg, err := config(w)
			if err != nil {
				return resp, err
			}
			info.ConfigToApply = cfg
		}
		resp.WorkspaceRailsInfos = append(resp.WorkspaceRailsInfos, info)
	}
	for _, o := range out.Orphans {
		info := protocol.WorkspaceRailsInfo{
			Name:             o.Info.Name,
			Namespace:        o.Info.Namespace,
			DesiredState:     string(workspace.Terminated),
			ActualState:      string(o.ActualState),
			ImagePullSecrets: []protocol.ImagePullSecret{},
		}
		if d := o.Info.LatestK8sDeploymentInfo; d != nil {
			info.DeploymentResourceVersion = d.Metadata.ResourceVersion
		}
		resp.WorkspaceRailsInfos = append(resp.WorkspaceRailsInfos, info)
	}
	return resp, nil
}
