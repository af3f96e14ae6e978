package server

import (
	"net/http"

	"github.com/hangar-dev/hangar/internal/backend/kube"
	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// agentInfo serves GET /api/v1/agent/info: who the agent is. The agent selects its Deployments by
// this id (the label the generated objects carry) before its first reconcile.
func (s *Server) agentInfo(w http.ResponseWriter, r *http.Request, agent workspace.Agent) error {
	writeJSON(w, http.StatusOK, protocol.AgentInfo{ID: agent.ID, Name: agent.Name, Settings: kube.Settings(agent),
		DNSZone: agent.Config.DNSZone, ProxyURLScheme: agent.Config.ProxyURLScheme})
	return nil
}
