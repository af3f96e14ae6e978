package server_test

import (
	"testing"

	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/sdk"
)

// oaTokensAndUsers validates the endpoints of tokens, users for admins, agents' and provisioners'
// tokens, agents' configs, and the proxies' revocation long-poll. dev is a user token.
func oaTokensAndUsers(t *testing.T, c *oaChecker, dev string) {
	admin := c.env.AdminToken

	// Tokens.
	var tok sdk.Token
	c.decode(c.do(dev, "POST", "/api/v1/tokens", map[string]any{"name": "laptop", "lifetime_seconds": 3600}, 201, true), &tok)
	if tok.Token == "" || tok.Status != sdk.TokenActive || tok.ExpiresAt == nil {
		t.Fatalf("created token %+v", tok)
	}
	c.do(dev, "POST", "/api/v1/tokens", map[string]any{"name": "laptop"}, 409, true)
	c.do(dev, "POST", "/api/v1/tokens", map[string]any{"name": "bad name"}, 400, true)
	c.do(dev, "POST", "/api/v1/tokens", map[string]any{"name": "x", "lifetime_seconds": "1h"}, 400, false)
	c.do(tok.Token, "GET", "/api/v1/tokens", nil, 200, true)
	c.do(admin, "GET", "/api/v1/tokens?user=dev", nil, 200, true)
	c.do(dev, "GET", "/api/v1/tokens?user=admin", nil, 403, true)
	c.do(admin, "GET", "/api/v1/tokens?user=nobody", nil, 404, true)
	c.do(dev, "DELETE", "/api/v1/tokens/laptop", nil, 200, true)
	c.do(tok.Token, "GET", "/api/v1/tokens", nil, 401, true)
	c.do(dev, "DELETE", "/api/v1/tokens/nothing", nil, 404, true)
	c.do(dev, "DELETE", "/api/v1/tokens/initial?user=admin", nil, 403, true)

	// Users for admins.
	c.do(admin, "GET", "/api/v1/users", nil, 200, true)
	c.do(dev, "GET", "/api/v1/users", nil, 403, true)
	c.do(admin, "POST", "/api/v1/users", map[string]any{"username": "sus"}, 201, true)
	c.do(admin, "PATCH", "/api/v1/users/sus", map[string]any{"suspended": true}, 200, true)
	c.do(admin, "PATCH", "/api/v1/users/sus", map[string]any{"suspended": false}, 200, true)
	c.do(admin, "PATCH", "/api/v1/users/sus", map[string]any{}, 400, false)
	c.do(admin, "PATCH", "/api/v1/users/admin", map[string]any{"suspended": true}, 409, true)
	c.do(admin, "PATCH", "/api/v1/users/nobody", map[string]any{"suspended": true}, 404, true)
	c.do(dev, "PATCH", "/api/v1/users/sus", map[string]any{"suspended": true}, 403, true)
	c.do(admin, "DELETE", "/api/v1/users/sus", nil, 204, true)
	c.do(admin, "DELETE", "/api/v1/users/sus", nil, 404, true)
	c.do(admin, "DELETE", "/api/v1/users/admin", nil, 409, true)

	// Agents: config and token.
	var k9 sdk.Agent
	c.decode(c.do(admin, "POST", "/api/v1/agents", map[string]any{"name": "k9", "config": map[string]any{"dns_zone": "k9.example.com"}}, 201, true), &k9)
	c.do(admin, "PATCH", "/api/v1/agents/k9", map[string]any{"config": map[string]any{"workspaces_quota": 5}}, 200, true)
	c.do(admin, "PATCH", "/api/v1/agents/k9", map[string]any{"config": map[string]any{"workspaces_quota": -2}}, 400, true)
	c.do(admin, "PATCH", "/api/v1/agents/nope", map[string]any{"config": map[string]any{}}, 404, true)
	c.do(dev, "PATCH", "/api/v1/agents/k9", map[string]any{"config": map[string]any{}}, 403, true)
	c.do(k9.Token, "GET", protocol.ProxyRevocationsPath+"?after=-1", nil, 200, true)
	c.do(k9.Token, "GET", protocol.ProxyRevocationsPath+"?timeout_seconds=0", nil, 400, false)
	var rotated sdk.Agent
	c.decode(c.do(admin, "POST", "/api/v1/agents/k9/token", nil, 200, true), &rotated)
	c.do(k9.Token, "GET", protocol.ProxyRevocationsPath, nil, 401, true)
	c.do(rotated.Token, "GET", protocol.ProxyRevocationsPath+"?after=-1", nil, 200, true)
	c.do(admin, "DELETE", "/api/v1/agents/k9/token", nil, 200, true)
	c.do(rotated.Token, "GET", protocol.ProxyRevocationsPath, nil, 401, true)
	c.do(admin, "POST", "/api/v1/agents/nope/token", nil, 404, true)
	c.do(admin, "DELETE", "/api/v1/agents/nope/token", nil, 404, true)
	c.do(dev, "POST", "/api/v1/agents/k9/token", nil, 403, true)
	c.do(dev, "DELETE", "/api/v1/agents/k9/token", nil, 403, true)

	// Provisioners' tokens.
	c.do(admin, "POST", "/api/v1/provisioners", map[string]any{"name": "p9"}, 201, true)
	c.do(admin, "POST", "/api/v1/provisioners/p9/token", nil, 200, true)
	c.do(admin, "DELETE", "/api/v1/provisioners/p9/token", nil, 200, true)
	c.do(admin, "POST", "/api/v1/provisioners/nope/token", nil, 404, true)
	c.do(admin, "DELETE", "/api/v1/provisioners/nope/token", nil, 404, true)
	c.do(dev, "POST", "/api/v1/provisioners/p9/token", nil, 403, true)
	c.do(dev, "DELETE", "/api/v1/provisioners/p9/token", nil, 403, true)
}
