package server

import (
	"fmt"
	"net/http"
	"time"

	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/reconcile"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// reconcile serves POST /api/v1/agent/reconcile: the Kubernetes service reads the agent's rows in
// scope (locked), decides with reconcile.Decide, writes, and answers, all in one transaction, so
// that a user's concurrent change is either seen by this decision or made after its write, never
// lost (kube.Service.Reconcile).
func (s *Server) reconcile(w http.ResponseWriter, r *http.Request, agent workspace.Agent) error {
	start := time.Now()
	s.agentSeen(r.Context(), agent)
	var req protocol.ReconcileRequest
	counted := &countingReader{r: r.Body}
	r.Body = counted
	// Tolerant reader: unknown fields are ignored, so that a newer agent (or a whole Deployment in
	// latest_k8s_deployment_info) works with this server; protocol.Version says what is understood.
	if err := decodeBody(w, r, protocol.MaxReconcileBodyBytes, &req, false); err != nil {
		return err
	}
	if n := protocol.TruncateMessages(&req); n > 0 {
		s.log.Info("agent reported messages over the bound: cut", "agent", agent.Name, "messages", n, "bound_bytes", protocol.MaxMessageBytes)
	}
	if err := reconcile.Validate(req); err != nil {
		return err
	}
	resp, out, err := s.kube.Reconcile(r.Context(), agent, req)
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
