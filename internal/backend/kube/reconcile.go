package kube

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/hangar-dev/hangar/internal/devfile"
	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/reconcile"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// Reconcile answers an agent's reconcile (req, already validated) in one store transaction
// (Store.Reconcile): the agent's rows in scope read locked, reconcile.Decide, the configs of the
// workspaces that need one generated from their devfiles — read inside the same transaction on a
// cache miss, never on a second connection — and the decided rows written. The answer is built
// before the commit: if a config cannot be generated, nothing is written and the agent retries,
// instead of responded_to_agent_at claiming a config that never went out. It returns the answer
// and the decision (for the caller's logs and metrics).
func (s *Service) Reconcile(ctx context.Context, agent workspace.Agent, req protocol.ReconcileRequest) (protocol.ReconcileResponse, reconcile.Output, error) {
	// The agent names a workspace by its cluster name (protocol.WorkspaceAgentInfo.Name).
	names := make([]string, len(req.WorkspaceAgentInfos))
	for i, info := range req.WorkspaceAgentInfos {
		names[i] = info.Name
	}
	cfg := agent.Config
	settings := Settings(agent)
	pullSecrets := make([]protocol.ImagePullSecret, len(cfg.ImagePullSecrets), len(cfg.ImagePullSecrets)+1)
	for i, p := range cfg.ImagePullSecrets {
		pullSecrets[i] = protocol.ImagePullSecret{Name: p.Name, Namespace: p.Namespace}
	}
	if p := cfg.ImageBuild.PushSecret; p != nil {
		// Copied into the workspace namespaces as the pull secrets are: image builds push with it,
		// and their workspaces pull the result with it (devfile.Generate mounts and names it).
		pullSecrets = append(pullSecrets, protocol.ImagePullSecret{Name: p.Name, Namespace: p.Namespace})
	}
	var resp protocol.ReconcileResponse
	var out reconcile.Output
	scope := store.ReconcileScope{AgentID: agent.ID, Full: req.UpdateType == protocol.UpdateFull, KubeNames: names}
	err := s.st.Reconcile(ctx, scope, func(tx store.ReconcileTx, rows []workspace.Workspace) ([]workspace.Workspace, error) {
		now := s.clock.Now()
		out = reconcile.Decide(reconcile.Input{UpdateType: req.UpdateType, Rows: rows, Infos: req.WorkspaceAgentInfos, Now: now})
		if err := recordReports(tx, rows, req.WorkspaceAgentInfos, now); err != nil {
			return nil, err
		}
		var err error
		resp, err = reconcile.Response(out, settings, pullSecrets, func(ws workspace.Workspace) (string, error) {
			return s.config(tx, ws, agent)
		})
		if err != nil {
			return nil, err
		}
		return out.Changed, nil
	})
	if err == nil {
		s.traces.annotate(&resp)
	}
	return resp, out, err
}

// recordReports stores the startup steps and pod alerts the agent reported for workspaces among
// rows, named by cluster name and namespace as reconcile.Decide names them (those of other agents,
// or unknown, are orphans: nothing is stored for them). An alert is recorded once (its kind,
// subject and time).
func recordReports(tx store.ReconcileTx, rows []workspace.Workspace, infos []protocol.WorkspaceAgentInfo, now time.Time) error {
	type ref struct{ name, namespace string }
	ids := make(map[ref]string, len(rows))
	for _, r := range rows {
		ids[ref{r.KubeName, r.Namespace}] = r.ID
	}
	for _, info := range infos {
		id, ok := ids[ref{info.Name, info.Namespace}]
		if !ok {
			continue
		}
		for _, a := range info.PodAlerts {
			at := a.At.UTC()
			if at.After(now.Add(time.Minute)) {
				at = now // an agent's clock ahead: not an alert that sorts first for ever
			}
			if err := tx.RecordAlert(id, workspace.Alert{Kind: a.Kind, Subject: a.Subject, Detail: a.Message, RaisedAt: at, ClearedAt: &at}); err != nil {
				return err
			}
		}
		if len(info.StartupSteps) == 0 {
			continue
		}
		steps := make([]workspace.StartupStep, len(info.StartupSteps))
		for i, st := range info.StartupSteps {
			steps[i] = workspace.StartupStep{Name: st.Name, Position: slices.Index(protocol.StartupStepOrder, st.Name), State: st.State, StartedAt: workspace.InUTC(st.StartedAt), EndedAt: workspace.InUTC(st.EndedAt),
				Detail: st.Detail, Log: st.Log, UpdatedAt: now}
		}
		if err := tx.SetStartupSteps(id, steps); err != nil {
			return err
		}
	}
	return nil
}

// Settings are the intervals an agent reconciles at, from its configuration (in every reconcile
// answer and in GET /api/v1/agent/info).
func Settings(agent workspace.Agent) protocol.Settings {
	return protocol.Settings{
		FullReconciliationIntervalSeconds:    agent.Config.FullReconcileIntervalSeconds,
		PartialReconciliationIntervalSeconds: agent.Config.PartialReconcileIntervalSeconds,
	}
}

// config generates the config_to_apply of a workspace, its devfile read through tx on a miss of
// the cache.
func (s *Service) config(tx store.ReconcileTx, ws workspace.Workspace, agent workspace.Agent) (string, error) {
	df, err := s.devfiles.get(ws.ID, ws.DefinitionGeneration, func() (string, error) { return tx.WorkspaceDevfile(ws.ID) })
	if err != nil {
		return "", fmt.Errorf("parse stored devfile of workspace %s: %w", ws.Name, err)
	}
	p := devfile.Params{
		WorkspaceID: ws.ID, WorkspaceName: ws.Name, KubeName: ws.KubeName, Owner: ws.OwnerName, AgentID: agent.ID,
		Namespace: ws.Namespace, DesiredState: ws.DesiredState, Agent: agent.Config,
		HelperHostKey: workspace.HelperHostKey(agent.TokenHash, ws.ID),
		OwnerFullName: ws.OwnerFullName, OwnerEmail: ws.OwnerEmail, DotfilesRepo: ws.OwnerDotfilesRepo,
	}
	if len(s.helperKey) > 0 && s.helperURL != nil {
		p.HelperToken, p.ServerURL, p.HelperGit = workspace.KubeHelperToken(s.helperKey, ws.ID), s.helperURL(), s.helperGit
	}
	cfg, err := devfile.Generate(df, p)
	if err != nil {
		return "", fmt.Errorf("generate config of workspace %s: %w", ws.Name, err)
	}
	return cfg, nil
}
