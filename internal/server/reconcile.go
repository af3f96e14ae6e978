package server

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/hangar-dev/hangar/internal/devfile"
	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/reconcile"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// reconcile serves POST /api/v1/agent/reconcile: read the agent's rows in scope (locked), decide
// with reconcile.Decide, write, and answer, all in one transaction, so that a user's concurrent
// change is either seen by this decision or made after its write, never lost.
func (s *Server) reconcile(w http.ResponseWriter, r *http.Request, agent store.Agent) error {
	start := time.Now()
	var req protocol.ReconcileRequest
	counted := &countingReader{r: r.Body}
	r.Body = counted
	// Tolerant reader: unknown fields are ignored, so that a newer agent (or a whole Deployment in
	// latest_k8s_deployment_info) works with this server; protocol.Version says what is understood.
	if err := decodeBody(w, r, protocol.MaxReconcileBodyBytes, &req, false); err != nil {
		return err
	}
	if err := reconcile.Validate(req); err != nil {
		return err
	}
	// The agent names a workspace by its cluster name (protocol.WorkspaceAgentInfo.Name).
	names := make([]string, len(req.WorkspaceAgentInfos))
	for i, info := range req.WorkspaceAgentInfos {
		names[i] = info.Name
	}
	cfg := agent.Config
	settings := settingsOf(agent)
	pullSecrets := make([]protocol.ImagePullSecret, len(cfg.ImagePullSecrets))
	for i, p := range cfg.ImagePullSecrets {
		pullSecrets[i] = protocol.ImagePullSecret{Name: p.Name, Namespace: p.Namespace}
	}
	var resp protocol.ReconcileResponse
	var out reconcile.Output
	scope := store.ReconcileScope{AgentID: agent.ID, Full: req.UpdateType == protocol.UpdateFull, KubeNames: names}
	err := s.store.Reconcile(r.Context(), scope, func(rows []store.Workspace) ([]store.Workspace, error) {
		out = reconcile.Decide(reconcile.Input{UpdateType: req.UpdateType, Rows: rows, Infos: req.WorkspaceAgentInfos, Now: s.clock.Now()})
		var err error
		// The answer is built before the commit: if a config cannot be generated, nothing is written
		// and the agent retries, instead of responded_to_agent_at claiming a config that never went out.
		resp, err = reconcile.Response(out, settings, pullSecrets, func(ws store.Workspace) (string, error) {
			return s.config(r.Context(), ws, agent)
		})
		if err != nil {
			return nil, err
		}
		return out.Changed, nil
	})
	if err != nil {
		return fmt.Errorf("reconcile agent %s: %w", agent.Name, err)
	}
	for _, tr := range out.Transitions {
		s.log.Info("workspace state changed", "agent", agent.Name, "workspace", tr.Workspace, "owner", tr.Owner, "field", tr.Field, "from", tr.From, "to", tr.To)
	}
	for _, o := range out.Orphans {
		s.log.Warn("agent reported a workspace the server does not know; answering Terminated so it is cleaned up",
			"agent", agent.Name, "workspace", o.Info.Name, "namespace", o.Info.Namespace)
	}
	s.metrics.orphans.Add(float64(len(out.Orphans)))
	cw := &countingWriter{ResponseWriter: w}
	writeJSON(cw, http.StatusOK, resp)
	s.metrics.observeReconcile(string(req.UpdateType), time.Since(start), counted.n, cw.n)
	s.log.Debug("reconciled", "agent", agent.Name, "update_type", req.UpdateType, "reported", len(req.WorkspaceAgentInfos),
		"answered", len(resp.WorkspaceRailsInfos), "orphans", len(out.Orphans))
	return nil
}

// config generates the config_to_apply of a workspace.
func (s *Server) config(ctx context.Context, ws store.Workspace, agent store.Agent) (string, error) {
	df, err := s.kube.Devfile(ctx, ws.ID)
	if err != nil {
		return "", fmt.Errorf("parse stored devfile of workspace %s: %w", ws.Name, err)
	}
	cfg, err := devfile.Generate(df, devfile.Params{
		WorkspaceID: ws.ID, WorkspaceName: ws.Name, KubeName: ws.KubeName, Owner: ws.OwnerName, AgentID: agent.ID,
		Namespace: ws.Namespace, DesiredState: ws.DesiredState, Agent: agent.Config,
		HelperHostKey: workspace.HelperHostKey(agent.TokenHash, ws.ID),
	})
	if err != nil {
		return "", fmt.Errorf("generate config of workspace %s: %w", ws.Name, err)
	}
	return cfg, nil
}
