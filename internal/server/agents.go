package server

import (
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/google/uuid"

	"github.com/hangar-dev/hangar/internal/audit"

	"github.com/hangar-dev/hangar/internal/devfile"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/workspace"
)

func (s *Server) createAgent(w http.ResponseWriter, r *http.Request, u workspace.User) (err error) {
	var req sdk.CreateAgentRequest
	if err := decodeJSON(w, r, sdk.MaxBodyBytes, &req); err != nil {
		return err
	}
	defer s.audit(&r, u, audit.AgentCreate, audit.Target{Kind: audit.KindAgent, Name: req.Name})(&err)
	v := &workspace.ValidationError{}
	if !workspace.IsDNSLabel(req.Name, 63) {
		v.Add("name", "must be 1 to 63 lower-case letters, digits or '-', starting and ending with a letter or digit, got %q", req.Name)
	}
	var cfg workspace.AgentConfig
	if len(req.Config) > 0 && !bytes.Equal(bytes.TrimSpace(req.Config), []byte("null")) {
		dec := json.NewDecoder(bytes.NewReader(req.Config))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&cfg); err != nil {
			ae := jsonError(err).(*apiError)
			for _, val := range ae.body.Validations {
				v.Add("config."+val.Field, "%s", val.Detail)
			}
		}
	}
	if err := v.Err(); err != nil {
		return err
	}
	cfg = cfg.WithDefaults()
	if err := validateAgentConfig(cfg); err != nil {
		return err
	}
	token := NewToken(agentTokenPrefix)
	now := s.clock.Now()
	a := workspace.Agent{ID: uuid.NewString(), Name: req.Name, TokenHash: HashToken(token), Config: cfg, CreatedAt: now, UpdatedAt: now}
	audit.From(r.Context()).SetTarget(audit.Target{Kind: audit.KindAgent, ID: a.ID, Name: a.Name})
	if err := s.store.CreateAgent(r.Context(), a); err != nil {
		return err
	}
	s.log.Info("agent registered", "agent", a.Name)
	out, err := toAgent(a, token)
	if err != nil {
		return err
	}
	out.Warnings = devfile.CheckAgentCaps(cfg)
	writeJSON(w, http.StatusCreated, out)
	return nil
}

func (s *Server) listAgents(w http.ResponseWriter, r *http.Request, _ workspace.User) error {
	agents, err := s.store.ListAgents(r.Context())
	if err != nil {
		return err
	}
	out := make([]sdk.Agent, 0, len(agents))
	for _, a := range agents {
		sa, err := toAgent(a, "")
		if err != nil {
			return err
		}
		out = append(out, sa)
	}
	if err := s.withLastSeen(r.Context(), out); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// validateAgentConfig checks an agent's configuration: its own rules (AgentConfig.Validate), and
// that its default devfile, if any, is a devfile workspaces can be made from.
func validateAgentConfig(cfg workspace.AgentConfig) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	if cfg.DefaultDevfile == "" {
		return nil
	}
	v := &workspace.ValidationError{}
	if len(cfg.DefaultDevfile) > sdk.MaxDevfileBytes {
		v.Add("config.default_devfile", "is %d bytes, the limit is %d", len(cfg.DefaultDevfile), sdk.MaxDevfileBytes)
	} else if _, err := devfile.Parse([]byte(cfg.DefaultDevfile)); err != nil {
		v.Add("config.default_devfile", "is not a devfile workspaces can be made from: %v", err)
	}
	return v.Err()
}
