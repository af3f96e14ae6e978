package server

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	"net/http"
	"slices"

	"github.com/hangar-dev/hangar/internal/audit"
	"github.com/hangar-dev/hangar/internal/devfile"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// Agents' and provisioners' tokens and agents' configs, for admins (docs/decisions.md, "Agent and
// provisioner tokens", "Changing an agent's config").

// fixedAgentFields are the config fields an agent keeps from its creation: workspaces' URLs and
// namespaces were derived from them, and the proxy's routes and the cluster's objects with them.
var fixedAgentFields = []string{"dns_zone", "namespace_mode", "shared_namespace"}

// updateAgent serves PATCH /api/v1/agents/{name} (admins): {"config": {...}} replaces the fields it
// names (null: back to the default) and keeps the others; the result is checked whole as at
// creation, each problem naming its field, and written in one statement or not at all.
func (s *Server) updateAgent(w http.ResponseWriter, r *http.Request, u workspace.User) (err error) {
	var req struct {
		Config json.RawMessage `json:"config"`
	}
	if err := decodeJSON(w, r, sdk.MaxBodyBytes, &req); err != nil {
		return err
	}
	name := r.PathValue("name")
	defer s.audit(&r, u, audit.AgentUpdate, audit.Target{Kind: audit.KindAgent, Name: clip(name)})(&err)
	var patch map[string]json.RawMessage
	if err := json.Unmarshal(req.Config, &patch); err != nil || patch == nil {
		return errBadRequest("invalid request", sdk.Validation{Field: "config", Detail: "must be an object of the config fields to change"})
	}
	a, err := s.store.AgentByName(r.Context(), name)
	if errors.Is(err, store.ErrNotFound) {
		return errNotFound("no agent %q", name)
	} else if err != nil {
		return err
	}
	audit.From(r.Context()).SetTarget(audit.Target{Kind: audit.KindAgent, ID: a.ID, Name: a.Name})
	cfg, fields, err := patchAgentConfig(a.Config, patch)
	if err != nil {
		return err
	}
	audit.From(r.Context()).Set("fields", fields)
	a, err = s.store.SetAgentConfig(r.Context(), a.ID, cfg, s.clock.Now())
	if err != nil {
		return err
	}
	s.log.Info("agent config changed", "agent", a.Name, "fields", fields, "by", u.Username)
	out, err := toAgent(a, "")
	if err != nil {
		return err
	}
	out.Warnings = devfile.CheckAgentCaps(cfg)
	writeJSON(w, http.StatusOK, out)
	return nil
}

// patchAgentConfig applies patch (top-level config fields; null resets one to its default) to cur,
// and checks the result as createAgent checks a new config. It returns the new config and the
// fields changed, or a validation error naming every bad field ("config.<field>").
func patchAgentConfig(cur workspace.AgentConfig, patch map[string]json.RawMessage) (workspace.AgentConfig, []string, error) {
	v := &workspace.ValidationError{}
	base, err := json.Marshal(cur)
	if err != nil {
		return cur, nil, err
	}
	var merged map[string]json.RawMessage
	if err := json.Unmarshal(base, &merged); err != nil {
		return cur, nil, err
	}
	fields := make([]string, 0, len(patch))
	for k, val := range patch {
		fields = append(fields, k)
		if slices.Contains(fixedAgentFields, k) {
			if !bytes.Equal(compactJSON(val), compactJSON(merged[k])) {
				v.Add("config."+k, "cannot be changed: it was fixed at the agent's creation (workspaces' URLs and namespaces follow from it); register a new agent instead")
			}
			continue
		}
		if bytes.Equal(bytes.TrimSpace(val), []byte("null")) {
			delete(merged, k)
			continue
		}
		merged[k] = val
	}
	slices.Sort(fields)
	b, err := json.Marshal(merged)
	if err != nil {
		return cur, nil, err
	}
	var cfg workspace.AgentConfig
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cfg); err != nil {
		ae := jsonError(err).(*apiError)
		for _, val := range ae.body.Validations {
			v.Add("config."+val.Field, "%s", val.Detail)
		}
	}
	if err := v.Err(); err != nil {
		return cur, nil, err
	}
	cfg = cfg.WithDefaults()
	if err := validateAgentConfig(cfg); err != nil {
		return cur, nil, err
	}
	return cfg, fields, nil
}

func compactJSON(b json.RawMessage) []byte {
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return b
	}
	return buf.Bytes()
}

// unusableHash is a token hash no token has (a SHA-256 is 32 bytes; this is longer and random):
// what a revoked agent's or provisioner's row holds until it gets a new token.
func unusableHash() []byte {
	b := make([]byte, 48)
	_, _ = rand.Read(b)
	return append([]byte("revoked:"), b...)
}

// agentToken serves POST (a new token, in this answer only) and DELETE (none: the agent and its
// proxies are refused until the next POST) /api/v1/agents/{name}/token (admins). The old token
// stops working at once. A new token also changes the host keys of its workspaces' helpers, which
// running workspaces take at their next start (docs/decisions.md, "The proxy pins the helper's
// host key").
func (s *Server) agentToken(w http.ResponseWriter, r *http.Request, u workspace.User) (err error) {
	name := r.PathValue("name")
	revoke := r.Method == http.MethodDelete
	defer s.audit(&r, u, audit.AgentToken, audit.Target{Kind: audit.KindAgent, Name: clip(name)})(&err)
	audit.From(r.Context()).Set("revoked", revoke)
	a, err := s.store.AgentByName(r.Context(), name)
	if errors.Is(err, store.ErrNotFound) {
		return errNotFound("no agent %q", name)
	} else if err != nil {
		return err
	}
	audit.From(r.Context()).SetTarget(audit.Target{Kind: audit.KindAgent, ID: a.ID, Name: a.Name})
	token, hash := "", unusableHash()
	if !revoke {
		token = NewToken(agentTokenPrefix)
		hash = HashToken(token)
	}
	if err := s.store.SetAgentToken(r.Context(), a.ID, hash, s.clock.Now()); err != nil {
		return err
	}
	s.log.Info("agent token replaced", "agent", a.Name, "revoked", revoke, "by", u.Username)
	out, err := toAgent(a, token)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// provisionerToken is agentToken for /api/v1/provisioners/{name}/token.
func (s *Server) provisionerToken(w http.ResponseWriter, r *http.Request, u workspace.User) (err error) {
	name := r.PathValue("name")
	revoke := r.Method == http.MethodDelete
	defer s.audit(&r, u, audit.ProvisionerToken, audit.Target{Kind: audit.KindProvisioner, Name: clip(name)})(&err)
	audit.From(r.Context()).Set("revoked", revoke)
	token, hash := "", unusableHash()
	if !revoke {
		token = NewToken(provisionerTokenPrefix)
		hash = HashToken(token)
	}
	p, err := s.store.SetProvisionerToken(r.Context(), name, hash)
	if errors.Is(err, store.ErrNotFound) {
		return errNotFound("no provisioner %q", name)
	} else if err != nil {
		return err
	}
	s.log.Info("provisioner token replaced", "provisioner", p.Name, "revoked", revoke, "by", u.Username)
	writeJSON(w, http.StatusOK, sdk.Provisioner{ID: p.ID, Name: p.Name, Token: token, CreatedAt: p.CreatedAt, LastSeenAt: p.LastSeenAt})
	return nil
}
