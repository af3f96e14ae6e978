package server_test

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/sdk"
)

// oaSSH validates the SSH keys of a user and the proxy's SSH check and activity report. userToken
// owns the workspace ws of the agent of agentToken.
func oaSSH(t *testing.T, c *oaChecker, userToken, agentToken string, ws sdk.Workspace) {
	t.Helper()
	const keys = "/api/v1/users/me/ssh-keys"
	line, fingerprint := newKey(t, "dev@laptop")
	c.do(userToken, "GET", keys, nil, 200, true)
	var k sdk.SSHKey
	c.decode(c.do(userToken, "POST", keys, sdk.AddSSHKeyRequest{PublicKey: line}, 201, true), &k)
	if k.Fingerprint != fingerprint || k.Name != "dev@laptop" {
		t.Errorf("added key %+v", k)
	}
	c.do(userToken, "POST", keys, sdk.AddSSHKeyRequest{PublicKey: line}, 409, true)
	c.do(userToken, "POST", keys, sdk.AddSSHKeyRequest{PublicKey: "not a key"}, 400, true)
	c.do(userToken, "POST", keys, map[string]any{"public_key": line, "name": strings.Repeat("n", 65)}, 400, false)
	c.do(userToken, "POST", keys, map[string]any{"name": "x"}, 400, false)
	c.do(agentToken, "GET", keys, nil, 401, false)
	var list sdk.SSHKeyList
	c.decode(c.do(userToken, "GET", keys, nil, 200, true), &list)
	if len(list.SSHKeys) != 1 || list.SSHKeys[0] != k {
		t.Errorf("listed keys %+v", list)
	}

	var ck protocol.ProxySSHCheckResponse
	c.decode(c.do(agentToken, "POST", protocol.ProxySSHCheckPath, protocol.ProxySSHCheckRequest{Workspace: ws.Name, PublicKey: line}, 200, true), &ck)
	if !ck.Allowed || ck.WorkspaceID != ws.ID || ck.Workspace != ws.Ref() {
		t.Errorf("SSH check of the owner's key: %+v", ck)
	}
	c.decode(c.do(agentToken, "POST", protocol.ProxySSHCheckPath, protocol.ProxySSHCheckRequest{Workspace: "admin/" + ws.Name, Token: userToken}, 200, true), &ck)
	if ck.Allowed || ck.Reason != protocol.ProxyForbidden {
		t.Errorf("SSH check of another owner's workspace: %+v", ck)
	}
	c.do(agentToken, "POST", protocol.ProxySSHCheckPath, protocol.ProxySSHCheckRequest{Workspace: ws.Name}, 400, true)
	c.decode(c.do(agentToken, "POST", protocol.ProxySSHCheckPath, protocol.ProxySSHCheckRequest{Workspace: "Root", PublicKey: line}, 200, true), &ck)
	if ck.Allowed || ck.Reason != protocol.ProxyNotFound {
		t.Errorf("SSH check of a user name that is no workspace name: %+v", ck)
	}
	c.do(agentToken, "POST", protocol.ProxySSHCheckPath, protocol.ProxySSHCheckRequest{Workspace: strings.Repeat("w", 201), Token: userToken}, 400, false)
	c.do(userToken, "POST", protocol.ProxySSHCheckPath, protocol.ProxySSHCheckRequest{Workspace: ws.Name, Token: userToken}, 401, false)

	var rec struct{ Recorded int }
	at := time.Date(2026, 1, 1, 4, 59, 0, 0, time.UTC)
	c.decode(c.do(agentToken, "POST", protocol.ProxyActivityPath, protocol.ProxyActivityRequest{Activity: []protocol.ProxyActivity{
		{WorkspaceID: ws.ID, Kind: protocol.ActivitySSH, At: at}, {WorkspaceID: ws.ID, Kind: protocol.ActivityHTTP, At: at},
	}}, 200, true), &rec)
	if rec.Recorded != 1 {
		t.Errorf("activity recorded %d, want 1", rec.Recorded)
	}
	c.do(agentToken, "POST", protocol.ProxyActivityPath, map[string]any{"activity": []any{map[string]any{"workspace_id": ws.ID, "kind": "ftp", "at": at}}}, 400, false)
	c.do(userToken, "POST", protocol.ProxyActivityPath, protocol.ProxyActivityRequest{}, 401, false)
	var got sdk.Workspace
	c.decode(c.do(userToken, "GET", "/api/v1/workspaces/"+url.PathEscape(ws.Name), nil, 200, true), &got)
	if got.LastActivityAt == nil || !got.LastActivityAt.Equal(at) {
		t.Errorf("the workspace after an activity report: %+v", got)
	}

	c.do(userToken, "DELETE", keys+"/"+url.PathEscape(k.Fingerprint), nil, 204, true)
	c.do(userToken, "DELETE", keys+"/"+k.ID, nil, 404, true)
}
