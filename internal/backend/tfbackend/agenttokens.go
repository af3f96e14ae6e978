package tfbackend

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hangar-dev/hangar/internal/build"
	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// Tokens of Terraform workspaces' helpers (docs/decisions.md, "Terraform workspaces: the helper
// connects out"). Every build handed to a provisioner gets a new one (mintAgentToken), which the
// provider's hangar_agent resource takes when it is created and keeps while it exists. When a build
// ends, the tokens of that build and older ones that are not in the state it leaves are removed
// (pruneAgentTokens): a token works while its agent exists in the workspace's Terraform state, or
// while the build it was minted for runs (its helper may connect during the apply).

// AgentResourceType is the type of the provider's agent resource.
const AgentResourceType = "hangar_agent"

// HashAgentToken is what the store keeps of a helper token.
func HashAgentToken(token string) []byte {
	h := sha256.Sum256([]byte(token))
	return h[:]
}

func (s *Service) mintAgentToken(ctx context.Context, w workspace.Workspace, b build.Build) (string, error) {
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", fmt.Errorf("mint a helper token: %w", err)
	}
	token := protocol.WorkspaceAgentTokenPrefix + base64.RawURLEncoding.EncodeToString(raw)
	if err := s.st.CreateWorkspaceAgentToken(ctx, store.WorkspaceAgentToken{Hash: HashAgentToken(token), WorkspaceID: w.ID, BuildNumber: b.Number, CreatedAt: s.now()}); err != nil {
		return "", fmt.Errorf("store the helper token: %w", err)
	}
	return token, nil
}

// pruneAgentTokens keeps, of the tokens of builds up to b, those of the agents in b's state (none
// for an orphan delete, whose resources Hangar no longer manages). A state it cannot read keeps
// none: the helper is refused rather than a stale token let in.
func (s *Service) pruneAgentTokens(b build.Build) {
	var keep [][]byte
	if !b.Orphan {
		tokens, err := AgentTokens(b.State)
		if err != nil {
			s.log.Warn("cannot read the helper tokens of a build's state; its helpers are refused until the next build", "build", b.Number, "workspace_id", b.WorkspaceID, "err", err)
		}
		for _, t := range tokens {
			keep = append(keep, HashAgentToken(t))
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := s.st.KeepWorkspaceAgentTokens(ctx, b.WorkspaceID, b.Number, keep)
	if err != nil {
		s.log.Error("cannot remove the helper tokens a build left unused", "build", b.Number, "workspace_id", b.WorkspaceID, "err", err)
		return
	}
	if n > 0 {
		s.log.Info("helper tokens removed", "build", b.Number, "workspace_id", b.WorkspaceID, "removed", n, "kept", len(keep))
	}
}

// maxAgentTokens bounds how many agent tokens one state may name.
const maxAgentTokens = 1000

// AgentTokens returns the tokens of the hangar_agent resources in a Terraform state (version 4
// JSON); an empty state has none. Only managed resources of Hangar's provider count.
func AgentTokens(state []byte) ([]string, error) {
	if len(strings.TrimSpace(string(state))) == 0 {
		return nil, nil
	}
	var st struct {
		Resources []struct {
			Mode      string `json:"mode"`
			Type      string `json:"type"`
			Provider  string `json:"provider"`
			Instances []struct {
				Attributes struct {
					Token any `json:"token"`
				} `json:"attributes"`
			} `json:"instances"`
		} `json:"resources"`
	}
	if err := json.Unmarshal(state, &st); err != nil {
		return nil, fmt.Errorf("terraform state: %w", err)
	}
	var out []string
	for _, r := range st.Resources {
		if r.Mode != "managed" || r.Type != AgentResourceType || !strings.Contains(r.Provider, `"hangar.dev/hangar/hangar"`) {
			continue
		}
		for _, in := range r.Instances {
			t, ok := in.Attributes.Token.(string)
			if !ok || !strings.HasPrefix(t, protocol.WorkspaceAgentTokenPrefix) {
				continue
			}
			if len(out) == maxAgentTokens {
				return out, errors.New("terraform state: more than 1000 hangar_agent instances")
			}
			out = append(out, t)
		}
	}
	return out, nil
}
