package server_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"golang.org/x/crypto/ssh"

	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/servertest"
)

// FuzzSSHKeyBody adds arbitrary bodies as SSH keys. Whatever the server takes is one plain key it
// can read back: the fingerprint is the key's, the key is kept without comment, the name is at
// most 64 characters without control characters, and the key finds its user; whatever it refuses
// is a 4xx that writes nothing.
func FuzzSSHKeyBody(f *testing.F) {
	line, _ := newKey(f, "fz@laptop")
	f.Add([]byte(`{"public_key":"` + line + `"}`))
	f.Add([]byte(`{"name":"work","public_key":"# a comment\n` + line + `\n"}`))
	f.Add([]byte(`{"public_key":"from=\"10.0.0.1\" ` + line + `"}`))
	f.Add([]byte(`{"public_key":"` + line + `\n` + line + `"}`))
	f.Add([]byte(`{"public_key":"` + strings.TrimSuffix(line, " fz@laptop") + ` \u0007\tname"}`))
	f.Add([]byte(`{"public_key":"ssh-dss AAAA"}`))
	f.Add([]byte(`{"public_key":"-----BEGIN OPENSSH PRIVATE KEY-----"}`))
	f.Add([]byte(`{"name":"` + strings.Repeat("é", 64) + `","public_key":"` + line + `"}`))
	f.Add([]byte(`{"public_key":1}`))

	env := servertest.NewWith(f, "sqlite")
	user := createUser(f, env, "fz")
	const keys = "/api/v1/users/me/ssh-keys"
	count := func(t *testing.T) int {
		var l sdk.SSHKeyList
		mustCall(t, env, user, "GET", keys, nil, http.StatusOK, &l)
		return len(l.SSHKeys)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		before := count(t)
		status, out := call(t, env, user, "POST", keys, body)
		switch {
		case status == http.StatusCreated:
		case status >= 400 && status < 500:
			if n := count(t); n != before {
				t.Fatalf("a refused key (%d %s) changed the list from %d keys to %d", status, out, before, n)
			}
			return
		default:
			t.Fatalf("POST %q answered %d %s", body, status, out)
		}
		var k sdk.SSHKey
		if err := json.Unmarshal(out, &k); err != nil {
			t.Fatal(err)
		}
		key, comment, options, rest, err := ssh.ParseAuthorizedKey([]byte(k.PublicKey))
		if err != nil || comment != "" || len(options) > 0 || len(rest) > 0 {
			t.Fatalf("stored key %q does not read back as one plain key: %v", k.PublicKey, err)
		}
		if _, cert := key.(*ssh.Certificate); cert || key.Type() == ssh.KeyAlgoDSA || ssh.FingerprintSHA256(key) != k.Fingerprint {
			t.Fatalf("stored %+v from %q", k, body)
		}
		if k.Name == "" || utf8.RuneCountInString(k.Name) > 64 || strings.IndexFunc(k.Name, unicode.IsControl) >= 0 {
			t.Fatalf("name %q from %q", k.Name, body)
		}
		u, got, err := env.Store.UserBySSHKey(t.Context(), k.Fingerprint)
		if err != nil || u.Username != "fz" || got.ID != k.ID {
			t.Fatalf("the key's user: %+v, %v", u, err)
		}
		mustCall(t, env, user, "DELETE", keys+"/"+url.PathEscape(k.Fingerprint), nil, http.StatusNoContent, nil)
	})
}

// FuzzSSHCheckBody sends arbitrary SSH checks. Nobody but the owner and an admin is ever allowed
// into the owner's workspace, an allowed answer names it exactly, and a refusal says nothing about
// it.
func FuzzSSHCheckBody(f *testing.F) {
	env := servertest.NewWith(f, "sqlite")
	agent := createAgent(f, env, "k1", nil)
	createAgent(f, env, "k2", nil)
	alice, bob := createUser(f, env, "alice"), createUser(f, env, "bob")
	aliceKey, _ := newKey(f, "alice")
	bobKey, _ := newKey(f, "bob")
	mustCall(f, env, alice, "POST", "/api/v1/users/me/ssh-keys", sdk.AddSSHKeyRequest{PublicKey: aliceKey}, http.StatusCreated, nil)
	mustCall(f, env, bob, "POST", "/api/v1/users/me/ssh-keys", sdk.AddSSHKeyRequest{PublicKey: bobKey}, http.StatusCreated, nil)
	var dev sdk.Workspace
	mustCall(f, env, alice, "POST", "/api/v1/workspaces", map[string]any{"name": "dev", "agent": "k1"}, http.StatusCreated, &dev)
	mustCall(f, env, alice, "POST", "/api/v1/workspaces", map[string]any{"name": "far", "agent": "k2"}, http.StatusCreated, nil)
	for _, req := range []protocol.ProxySSHCheckRequest{
		{Workspace: "dev", PublicKey: aliceKey},
		{Workspace: "alice/dev", PublicKey: bobKey},
		{Workspace: "dev", PublicKey: bobKey},
		{Workspace: "alice/dev", Token: env.AdminToken},
		{Workspace: "alice/dev", Token: bob},
		{Workspace: "far", Token: alice},
		{Workspace: "dev", Token: alice, PublicKey: aliceKey},
		{Workspace: "dev", Token: alice, ClientAddress: "203.0.113.7"},
		{Workspace: "dev", Token: "hgu_wrong", ClientAddress: "203.0.113.7"},
	} {
		b, _ := json.Marshal(req)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		status, out := call(t, env, agent, "POST", protocol.ProxySSHCheckPath, body)
		if status >= 400 && status < 500 {
			return
		}
		if status != http.StatusOK {
			t.Fatalf("answered %d %s to %q", status, out, body)
		}
		var got protocol.ProxySSHCheckResponse
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatal(err)
		}
		if !got.Allowed {
			if got.Workspace != "" || got.WorkspaceID != "" || got.Status != "" || got.Reason == "" {
				t.Fatalf("a refusal %+v to %q", got, body)
			}
			return
		}
		if (got.User != "alice" && got.User != "admin") || got.Workspace != "alice/dev" || got.WorkspaceID != dev.ID || got.Status == "" {
			t.Fatalf("allowed %+v to %q", got, body)
		}
	})
}

// FuzzActivityBody sends arbitrary activity reports. A workspace's last use never moves back, is
// never later than a minute ahead of the server's clock, and moves only for the calling agent's
// workspace; a refused report records nothing.
func FuzzActivityBody(f *testing.F) {
	env := servertest.NewWith(f, "sqlite")
	agent, user, mine, theirs := activityFixture(f, env)
	for _, at := range []string{"2026-01-01T05:00:00Z", "2026-01-01T05:00:59.999999999+00:00", "2999-12-31T23:59:59Z", "0001-01-01T00:00:00Z", "1969-12-31T23:59:59Z"} {
		f.Add([]byte(`{"activity":[{"workspace_id":"` + mine.ID + `","kind":"ssh","at":"` + at + `"},{"workspace_id":"` + theirs.ID + `","kind":"http","at":"` + at + `"}]}`))
	}
	f.Add([]byte(`{"activity":[{"workspace_id":"` + mine.ID + `","kind":"ftp","at":"2026-01-01T05:00:00Z"}]}`))
	f.Add([]byte(`{"activity":null}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		before := lastUsed(t, env, user, "dev")
		status, out := call(t, env, agent, "POST", protocol.ProxyActivityPath, body)
		after := lastUsed(t, env, user, "dev")
		if other := lastUsed(t, env, user, "other"); other != nil {
			t.Fatalf("another agent's workspace was recorded as used at %v after %q", other, body)
		}
		switch {
		case status == http.StatusOK:
			var rec struct{ Recorded *int }
			if err := json.Unmarshal(out, &rec); err != nil || rec.Recorded == nil || *rec.Recorded < 0 || *rec.Recorded > 1 {
				t.Fatalf("answered %s to %q", out, body)
			}
		case status >= 400 && status < 500:
			if (before == nil) != (after == nil) || (before != nil && !before.Equal(*after)) {
				t.Fatalf("a refused report (%d %s) moved the last use from %v to %v", status, out, before, after)
			}
			return
		default:
			t.Fatalf("answered %d %s to %q", status, out, body)
		}
		if before != nil && (after == nil || after.Before(*before)) {
			t.Fatalf("the last use moved back from %v to %v after %q", before, after, body)
		}
		if after != nil && after.After(env.Clock.Now().Add(time.Minute)) {
			t.Fatalf("the last use %v is more than a minute ahead of the server's clock after %q", after, body)
		}
	})
}
