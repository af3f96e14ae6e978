package server_test

import (
	"crypto/dsa" //nolint:staticcheck // only to build a DSA public key the server must refuse
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/server"
	"github.com/hangar-dev/hangar/internal/servertest"
)

// newKey returns a fresh ed25519 public key in authorized_keys form with comment (none if empty),
// and its fingerprint.
func newKey(t testing.TB, comment string) (line, fingerprint string) {
	t.Helper()
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return authorizedLine(t, pub, comment)
}

// authorizedLine is key (a crypto public key or an ssh.PublicKey) in authorized_keys form.
func authorizedLine(t testing.TB, key any, comment string) (line, fingerprint string) {
	t.Helper()
	pk, ok := key.(ssh.PublicKey)
	if !ok {
		var err error
		if pk, err = ssh.NewPublicKey(key); err != nil {
			t.Fatal(err)
		}
	}
	line = strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pk)))
	if comment != "" {
		line += " " + comment
	}
	return line, ssh.FingerprintSHA256(pk)
}

func TestSSHKeys(t *testing.T) {
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			env := servertest.NewWith(t, engine)
			alice, bob := createUser(t, env, "alice"), createUser(t, env, "bob")
			agent := createAgent(t, env, "k1", nil)
			const keys = "/api/v1/users/me/ssh-keys"

			var list sdk.SSHKeyList
			status, body := call(t, env, alice, "GET", keys, nil)
			if status != http.StatusOK || strings.TrimSpace(string(body)) != `{"ssh_keys":[]}` {
				t.Fatalf("no keys yet: %d %s, want an empty list", status, body)
			}

			// The comment names a key; without one, its type; a given name wins. The key is kept
			// without its comment; a .pub file's newline and comment lines are fine.
			laptop, laptopFP := newKey(t, "alice@laptop")
			var k1 sdk.SSHKey
			mustCall(t, env, alice, "POST", keys, sdk.AddSSHKeyRequest{PublicKey: "# my laptop\n" + laptop + "\n"}, http.StatusCreated, &k1)
			if k1.Name != "alice@laptop" || k1.Fingerprint != laptopFP || k1.PublicKey != strings.TrimSuffix(laptop, " alice@laptop") ||
				!k1.CreatedAt.Equal(servertest.Start) || k1.ID == "" {
				t.Errorf("added %+v", k1)
			}
			ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
			if err != nil {
				t.Fatal(err)
			}
			ecLine, ecFP := authorizedLine(t, &ecKey.PublicKey, "")
			env.Clock.Advance(time.Second)
			var k2 sdk.SSHKey
			mustCall(t, env, alice, "POST", keys, sdk.AddSSHKeyRequest{PublicKey: ecLine}, http.StatusCreated, &k2)
			if k2.Name != "ecdsa-sha2-nistp256" || k2.Fingerprint != ecFP {
				t.Errorf("a key without a comment: %+v, want its type as its name", k2)
			}
			rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
			if err != nil {
				t.Fatal(err)
			}
			rsaLine, _ := authorizedLine(t, &rsaKey.PublicKey, "old laptop")
			env.Clock.Advance(time.Second)
			var k3 sdk.SSHKey
			mustCall(t, env, alice, "POST", keys, sdk.AddSSHKeyRequest{Name: "büro", PublicKey: rsaLine}, http.StatusCreated, &k3)
			if k3.Name != "büro" {
				t.Errorf("a named key: %+v", k3)
			}
			long, _ := newKey(t, strings.Repeat("c", 70))
			var k4 sdk.SSHKey
			mustCall(t, env, bob, "POST", keys, sdk.AddSSHKeyRequest{PublicKey: long}, http.StatusCreated, &k4)
			if k4.Name != strings.Repeat("c", 64) {
				t.Errorf("a long comment made the name %q, want its first 64 characters", k4.Name)
			}

			mustCall(t, env, alice, "GET", keys, nil, http.StatusOK, &list)
			if len(list.SSHKeys) != 3 || list.SSHKeys[0] != k1 || list.SSHKeys[1] != k2 || list.SSHKeys[2] != k3 {
				t.Fatalf("alice's keys %+v, want the three she added, oldest first", list.SSHKeys)
			}

			// A key identifies one user: registering it again is a 409 that does not say whose it is.
			for who, token := range map[string]string{"alice": alice, "bob": bob} {
				status, body := call(t, env, token, "POST", keys, sdk.AddSSHKeyRequest{PublicKey: laptop})
				if e := apiError(t, body); status != http.StatusConflict || e.Message != "this key is already registered" || strings.Contains(string(body), "alice") {
					t.Errorf("%s registers alice's key again: %d %s", who, status, body)
				}
			}

			// Bad input: 400 naming the field, nothing written.
			var dsaKey dsa.PrivateKey
			if err := dsa.GenerateParameters(&dsaKey.Parameters, rand.Reader, dsa.L1024N160); err != nil {
				t.Fatal(err)
			}
			if err := dsa.GenerateKey(&dsaKey, rand.Reader); err != nil {
				t.Fatal(err)
			}
			dsaLine, _ := authorizedLine(t, &dsaKey.PublicKey, "")
			weak, err := rsa.GenerateKey(rand.Reader, 1024)
			if err != nil {
				t.Fatal(err)
			}
			weakLine, _ := authorizedLine(t, &weak.PublicKey, "")
			certPub, certPriv, _ := ed25519.GenerateKey(rand.Reader)
			signer, err := ssh.NewSignerFromKey(certPriv)
			if err != nil {
				t.Fatal(err)
			}
			sshPub, _ := ssh.NewPublicKey(certPub)
			cert := &ssh.Certificate{Key: sshPub, CertType: ssh.UserCert, KeyId: "alice", ValidBefore: ssh.CertTimeInfinity}
			if err := cert.SignCert(rand.Reader, signer); err != nil {
				t.Fatal(err)
			}
			certLine, _ := authorizedLine(t, cert, "")
			other, _ := newKey(t, "")
			for _, c := range []struct {
				name         string
				body         any
				field, words string
			}{
				{"no key", sdk.AddSSHKeyRequest{Name: "x"}, "public_key", "is required"},
				{"blank", sdk.AddSSHKeyRequest{PublicKey: " \n# nothing\n"}, "public_key", "is required"},
				{"not a key", sdk.AddSSHKeyRequest{PublicKey: "hello"}, "public_key", "authorized_keys form"},
				{"two keys", sdk.AddSSHKeyRequest{PublicKey: other + "\n" + ecLine}, "public_key", "exactly one key"},
				{"options", sdk.AddSSHKeyRequest{PublicKey: `from="10.0.0.1" ` + other}, "public_key", "no options"},
				{"certificate", sdk.AddSSHKeyRequest{PublicKey: certLine}, "public_key", "not a certificate"},
				{"DSA", sdk.AddSSHKeyRequest{PublicKey: dsaLine}, "public_key", "DSA key"},
				{"DSA x/crypto/ssh cannot read", sdk.AddSSHKeyRequest{PublicKey: "ssh-dss AAAAB3NzaC1kc3MAAAABFwAAAAELAAAAAQQAAAABCA== old"}, "public_key", "DSA key"},
				{"RSA 1024", sdk.AddSSHKeyRequest{PublicKey: weakLine}, "public_key", "RSA key of 1024 bits"},
				{"private key", sdk.AddSSHKeyRequest{PublicKey: "-----BEGIN OPENSSH PRIVATE KEY-----\nb3Blbn...\n-----END OPENSSH PRIVATE KEY-----\n"}, "public_key", "private key"},
				{"too long", sdk.AddSSHKeyRequest{PublicKey: other + strings.Repeat(" ", 16<<10)}, "public_key", "too long"},
				{"long name", sdk.AddSSHKeyRequest{Name: strings.Repeat("n", 65), PublicKey: other}, "name", "at most 64 characters"},
				{"name with a newline", sdk.AddSSHKeyRequest{Name: "a\nb", PublicKey: other}, "name", "control characters"},
				{"name with spaces around", sdk.AddSSHKeyRequest{Name: " a ", PublicKey: other}, "name", "spaces"},
				{"unknown field", map[string]any{"public_key": other, "key": other}, "key", "unknown field"},
				{"not a string", map[string]any{"public_key": 1}, "public_key", "must be a string"},
			} {
				status, body := call(t, env, alice, "POST", keys, c.body)
				e := apiError(t, body)
				if status != http.StatusBadRequest || len(e.Validations) != 1 || e.Validations[0].Field != c.field || !strings.Contains(e.Validations[0].Detail, c.words) {
					t.Errorf("%s: %d %s, want 400 naming %s (%q)", c.name, status, body, c.field, c.words)
				}
			}
			status, body = call(t, env, alice, "POST", keys, `{"public_key":"`+strings.Repeat("a", sdk.MaxBodyBytes)+`"}`)
			if status != http.StatusRequestEntityTooLarge {
				t.Errorf("a body over 1 MiB: %d %s", status, body)
			}
			mustCall(t, env, alice, "GET", keys, nil, http.StatusOK, &list)
			if len(list.SSHKeys) != 3 {
				t.Errorf("alice has %d keys after refused additions, want 3", len(list.SSHKeys))
			}

			// Removal: by id or fingerprint (its '/' escaped), one's own only.
			status, body = call(t, env, bob, "DELETE", keys+"/"+k1.ID, nil)
			if status != http.StatusNotFound || !strings.Contains(apiError(t, body).Message, k1.ID) {
				t.Errorf("bob removes alice's key: %d %s", status, body)
			}
			mustCall(t, env, bob, "DELETE", keys+"/"+url.PathEscape(k1.Fingerprint), nil, http.StatusNotFound, nil)
			mustCall(t, env, alice, "DELETE", keys+"/"+k1.ID, nil, http.StatusNoContent, nil)
			mustCall(t, env, alice, "DELETE", keys+"/"+k1.ID, nil, http.StatusNotFound, nil)
			mustCall(t, env, alice, "DELETE", keys+"/"+url.PathEscape(k2.Fingerprint), nil, http.StatusNoContent, nil)
			mustCall(t, env, alice, "GET", keys, nil, http.StatusOK, &list)
			if len(list.SSHKeys) != 1 || list.SSHKeys[0] != k3 {
				t.Errorf("alice's keys after removing two: %+v", list.SSHKeys)
			}
			// A removed key may be registered again, by anyone.
			mustCall(t, env, bob, "POST", keys, sdk.AddSSHKeyRequest{PublicKey: laptop}, http.StatusCreated, nil)

			// At most 100 keys a user.
			for i := range server.MaxSSHKeysPerUser - 1 {
				line, _ := newKey(t, fmt.Sprintf("k%d", i))
				mustCall(t, env, alice, "POST", keys, sdk.AddSSHKeyRequest{PublicKey: line}, http.StatusCreated, nil)
			}
			status, body = call(t, env, alice, "POST", keys, sdk.AddSSHKeyRequest{PublicKey: other})
			if e := apiError(t, body); status != http.StatusConflict || e.Message != "too many SSH keys" || !strings.Contains(e.Detail, "at most 100") {
				t.Errorf("a 101st key: %d %s", status, body)
			}

			// Users only.
			mustCall(t, env, "", "GET", keys, nil, http.StatusUnauthorized, nil)
			mustCall(t, env, agent, "POST", keys, sdk.AddSSHKeyRequest{PublicKey: other}, http.StatusUnauthorized, nil)
			mustCall(t, env, agent, "DELETE", keys+"/"+k3.ID, nil, http.StatusUnauthorized, nil)
		})
	}
}

func TestProxySSHCheck(t *testing.T) {
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			env := servertest.NewWith(t, engine)
			k1, k2 := createAgent(t, env, "k1", nil), createAgent(t, env, "k2", nil)
			alice, bob := createUser(t, env, "alice"), createUser(t, env, "bob")
			aliceKey, _ := newKey(t, "alice@laptop")
			bobKey, _ := newKey(t, "")
			strangerKey, _ := newKey(t, "")
			var aliceSSH sdk.SSHKey
			mustCall(t, env, alice, "POST", "/api/v1/users/me/ssh-keys", sdk.AddSSHKeyRequest{PublicKey: aliceKey}, http.StatusCreated, &aliceSSH)
			mustCall(t, env, bob, "POST", "/api/v1/users/me/ssh-keys", sdk.AddSSHKeyRequest{PublicKey: bobKey}, http.StatusCreated, nil)
			var dev sdk.Workspace
			mustCall(t, env, alice, "POST", "/api/v1/workspaces", map[string]any{"name": "dev", "agent": "k1"}, http.StatusCreated, &dev)
			mustCall(t, env, alice, "POST", "/api/v1/workspaces", map[string]any{"name": "elsewhere", "agent": "k2"}, http.StatusCreated, nil)
			mustCall(t, env, env.AdminToken, "POST", "/api/v1/templates/tf/versions", sdk.CreateTemplateVersionRequest{Kind: "terraform", Archive: tfModule(t)}, http.StatusCreated, nil)
			mustCall(t, env, alice, "POST", "/api/v1/workspaces", map[string]any{"name": "vm", "template": "tf"}, http.StatusCreated, nil)

			check := func(agent string, req protocol.ProxySSHCheckRequest) protocol.ProxySSHCheckResponse {
				t.Helper()
				var out protocol.ProxySSHCheckResponse
				mustCall(t, env, agent, "POST", protocol.ProxySSHCheckPath, req, http.StatusOK, &out)
				return out
			}
			allowed := func(what string, got protocol.ProxySSHCheckResponse, user, status string) {
				t.Helper()
				if !got.Allowed || got.Reason != "" || got.User != user || got.Workspace != "alice/dev" || got.WorkspaceID != dev.ID || got.Status != status {
					t.Errorf("%s: %+v, want %s allowed into alice/dev (%s), %s", what, got, user, dev.ID, status)
				}
			}
			refused := func(what string, got protocol.ProxySSHCheckResponse, user, reason string) {
				t.Helper()
				if got.Allowed || got.Reason != reason || got.User != user || got.Workspace != "" || got.WorkspaceID != "" || got.Status != "" {
					t.Errorf("%s: %+v, want %q refused (%s), and nothing about the workspace", what, got, user, reason)
				}
			}

			allowed("alice's key", check(k1, protocol.ProxySSHCheckRequest{Workspace: "dev", PublicKey: aliceKey}), "alice", "CreationRequested")
			allowed("alice's key as the proxy sends it", check(k1, protocol.ProxySSHCheckRequest{Workspace: "dev", PublicKey: aliceSSH.PublicKey}), "alice", "CreationRequested")
			allowed("alice's token", check(k1, protocol.ProxySSHCheckRequest{Workspace: "dev", Token: alice}), "alice", "CreationRequested")
			allowed("alice naming herself", check(k1, protocol.ProxySSHCheckRequest{Workspace: "alice/dev", PublicKey: aliceKey}), "alice", "CreationRequested")
			allowed("an admin", check(k1, protocol.ProxySSHCheckRequest{Workspace: "alice/dev", Token: env.AdminToken}), "admin", "CreationRequested")
			refused("bob", check(k1, protocol.ProxySSHCheckRequest{Workspace: "alice/dev", PublicKey: bobKey}), "bob", protocol.ProxyForbidden)
			refused("bob, a workspace that does not exist", check(k1, protocol.ProxySSHCheckRequest{Workspace: "alice/nope", PublicKey: bobKey}), "bob", protocol.ProxyForbidden)
			refused("bob's own dev, which he has not", check(k1, protocol.ProxySSHCheckRequest{Workspace: "dev", PublicKey: bobKey}), "bob", protocol.ProxyNotFound)
			refused("an admin, nobody's", check(k1, protocol.ProxySSHCheckRequest{Workspace: "nobody/dev", Token: env.AdminToken}), "admin", protocol.ProxyNotFound)
			refused("an unregistered key", check(k1, protocol.ProxySSHCheckRequest{Workspace: "dev", PublicKey: strangerKey}), "", protocol.ProxyUnauthenticated)
			refused("an unknown token", check(k1, protocol.ProxySSHCheckRequest{Workspace: "dev", Token: "hgu_nope"}), "", protocol.ProxyUnauthenticated)
			refused("another agent's proxy", check(k2, protocol.ProxySSHCheckRequest{Workspace: "dev", PublicKey: aliceKey}), "alice", protocol.ProxyNotFound)
			refused("a workspace of another agent", check(k1, protocol.ProxySSHCheckRequest{Workspace: "elsewhere", PublicKey: aliceKey}), "alice", protocol.ProxyNotFound)
			refused("a terraform workspace", check(k1, protocol.ProxySSHCheckRequest{Workspace: "vm", PublicKey: aliceKey}), "alice", protocol.ProxyNotFound)
			// The SSH user name is whatever the client typed: one that is no workspace name names none.
			for _, name := range []string{"", "root", "Dev", "alice/", "/dev", "a/b/c", "dev\x00"} {
				refused("user name "+strconv.Quote(name), check(k1, protocol.ProxySSHCheckRequest{Workspace: name, PublicKey: aliceKey}), "alice", protocol.ProxyNotFound)
			}
			refused("a bad user name with an unknown key", check(k1, protocol.ProxySSHCheckRequest{Workspace: "Dev", PublicKey: strangerKey}), "", protocol.ProxyUnauthenticated)

			// Stopped: allowed, with its state, so that the proxy can say so; deleted: not found.
			mustCall(t, env, alice, "PATCH", "/api/v1/workspaces/dev", map[string]any{"desired_state": "Stopped"}, http.StatusOK, nil)
			info := infoOf(t, env, "dev")
			info.LatestK8sDeploymentInfo = deploymentIn("Stopped", 3)
			reconcileCall(t, env, k1, protocol.ReconcileRequest{UpdateType: protocol.UpdatePartial, WorkspaceAgentInfos: []protocol.WorkspaceAgentInfo{info}})
			allowed("stopped", check(k1, protocol.ProxySSHCheckRequest{Workspace: "dev", PublicKey: aliceKey}), "alice", "Stopped")
			// A removed key and a replaced token are refused at once.
			mustCall(t, env, alice, "DELETE", "/api/v1/users/me/ssh-keys/"+aliceSSH.ID, nil, http.StatusNoContent, nil)
			refused("a removed key", check(k1, protocol.ProxySSHCheckRequest{Workspace: "dev", PublicKey: aliceKey}), "", protocol.ProxyUnauthenticated)
			var rotated sdk.User
			mustCall(t, env, alice, "POST", "/api/v1/users/me/token", nil, http.StatusOK, &rotated)
			refused("a replaced token", check(k1, protocol.ProxySSHCheckRequest{Workspace: "dev", Token: alice}), "", protocol.ProxyUnauthenticated)
			mustCall(t, env, rotated.Token, "PATCH", "/api/v1/workspaces/dev", map[string]any{"desired_state": "Terminated"}, http.StatusOK, nil)
			refused("desired Terminated", check(k1, protocol.ProxySSHCheckRequest{Workspace: "dev", Token: rotated.Token}), "alice", protocol.ProxyNotFound)

			// Bad requests: 400 naming the field; agents only.
			for _, c := range []struct {
				name  string
				body  any
				field string
			}{
				{"both", protocol.ProxySSHCheckRequest{Workspace: "dev", PublicKey: bobKey, Token: bob}, "public_key"},
				{"neither", protocol.ProxySSHCheckRequest{Workspace: "dev"}, "public_key"},
				{"a long workspace", protocol.ProxySSHCheckRequest{Workspace: strings.Repeat("a", 201), Token: bob}, "workspace"},
				{"not a key", protocol.ProxySSHCheckRequest{Workspace: "dev", PublicKey: "ssh-ed25519 !!"}, "public_key"},
				{"a long key", protocol.ProxySSHCheckRequest{Workspace: "dev", PublicKey: strings.Repeat("a", 16<<10+1)}, "public_key"},
				{"a long token", protocol.ProxySSHCheckRequest{Workspace: "dev", Token: strings.Repeat("a", 513)}, "token"},
				{"unknown field", map[string]any{"workspace": "dev", "token": bob, "user": "bob"}, "user"},
			} {
				status, body := call(t, env, k1, "POST", protocol.ProxySSHCheckPath, c.body)
				if e := apiError(t, body); status != http.StatusBadRequest || len(e.Validations) != 1 || e.Validations[0].Field != c.field {
					t.Errorf("%s: %d %s, want 400 naming %s", c.name, status, body, c.field)
				}
			}
			mustCall(t, env, k1, "POST", protocol.ProxySSHCheckPath, `{"workspace":"dev","public_key":"`+strings.Repeat("a", 32<<10)+`"}`, http.StatusRequestEntityTooLarge, nil)
			mustCall(t, env, bob, "POST", protocol.ProxySSHCheckPath, protocol.ProxySSHCheckRequest{Workspace: "dev", Token: bob}, http.StatusUnauthorized, nil)
		})
	}
}

// activityFixture registers agents k1 and k2 and user alice, who gets a workspace on each: dev on
// k1 and other on k2. It returns k1's token, alice's, and the two workspaces.
func activityFixture(t testing.TB, env *servertest.Env) (k1, alice string, dev, other sdk.Workspace) {
	t.Helper()
	k1 = createAgent(t, env, "k1", nil)
	createAgent(t, env, "k2", nil)
	alice = createUser(t, env, "alice")
	mustCall(t, env, alice, "POST", "/api/v1/workspaces", map[string]any{"name": "dev", "agent": "k1"}, http.StatusCreated, &dev)
	mustCall(t, env, alice, "POST", "/api/v1/workspaces", map[string]any{"name": "other", "agent": "k2"}, http.StatusCreated, &other)
	return k1, alice, dev, other
}

// lastUsed reads the last_activity_at of the caller's workspace name.
func lastUsed(t testing.TB, env *servertest.Env, token, name string) *time.Time {
	t.Helper()
	var w sdk.Workspace
	mustCall(t, env, token, "GET", "/api/v1/workspaces/"+name, nil, http.StatusOK, &w)
	return w.LastActivityAt
}

func TestProxyActivity(t *testing.T) {
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			env := servertest.NewWith(t, engine)
			k1, alice, dev, other := activityFixture(t, env)
			if dev.LastActivityAt != nil {
				t.Fatalf("a new workspace was last used at %v", dev.LastActivityAt)
			}
			now := servertest.Start
			report := func(want int, items ...protocol.ProxyActivity) {
				t.Helper()
				var out struct{ Recorded *int }
				mustCall(t, env, k1, "POST", protocol.ProxyActivityPath, protocol.ProxyActivityRequest{Activity: items}, http.StatusOK, &out)
				if out.Recorded == nil || *out.Recorded != want {
					t.Errorf("report %+v recorded %v, want %d", items, out.Recorded, want)
				}
			}
			want := func(what string, got *time.Time, at time.Time) {
				t.Helper()
				if got == nil || !got.Equal(at) {
					t.Errorf("%s: dev last used at %v, want %v", what, got, at)
				}
			}

			report(1,
				protocol.ProxyActivity{WorkspaceID: dev.ID, Kind: protocol.ActivitySSH, At: now.Add(-10 * time.Minute)},
				protocol.ProxyActivity{WorkspaceID: dev.ID, Kind: protocol.ActivityHTTP, At: now.Add(-5 * time.Minute)},
				protocol.ProxyActivity{WorkspaceID: other.ID, Kind: protocol.ActivitySSH, At: now}, // k2's: ignored
				protocol.ProxyActivity{WorkspaceID: "no-such-workspace", Kind: protocol.ActivitySSH, At: now},
			)
			want("the latest of two", lastUsed(t, env, alice, "dev"), now.Add(-5*time.Minute))
			if at := lastUsed(t, env, alice, "other"); at != nil {
				t.Errorf("another agent's workspace was recorded as used at %v", at)
			}
			report(1, protocol.ProxyActivity{WorkspaceID: dev.ID, Kind: protocol.ActivitySSH, At: now.Add(-time.Hour)})
			want("an older report", lastUsed(t, env, alice, "dev"), now.Add(-5*time.Minute))
			report(1, protocol.ProxyActivity{WorkspaceID: dev.ID, Kind: protocol.ActivitySSH, At: now.Add(time.Hour)})
			want("a time an hour ahead is taken as now", lastUsed(t, env, alice, "dev"), now)
			report(1, protocol.ProxyActivity{WorkspaceID: dev.ID, Kind: protocol.ActivityHTTP, At: now.Add(30 * time.Second)})
			want("a time within a minute ahead is kept", lastUsed(t, env, alice, "dev"), now.Add(30*time.Second))
			report(0)
			var all []sdk.Workspace
			mustCall(t, env, alice, "GET", "/api/v1/workspaces", nil, http.StatusOK, &all)
			if len(all) != 2 || all[0].Name != "dev" || all[0].LastActivityAt == nil || all[1].LastActivityAt != nil {
				t.Errorf("the list: %+v", all)
			}

			// Bad reports: 400 naming each bad field, and nothing recorded, the good items included.
			later := now.Add(45 * time.Second)
			status, body := call(t, env, k1, "POST", protocol.ProxyActivityPath, map[string]any{"activity": []map[string]any{
				{"workspace_id": dev.ID, "kind": "ssh", "at": later},
				{"workspace_id": dev.ID, "kind": "ftp", "at": later},
				{"workspace_id": "", "kind": "http", "at": later},
				{"workspace_id": dev.ID, "kind": "http"},
				{"workspace_id": "a\u0000b", "kind": "http", "at": later},
			}})
			e := apiError(t, body)
			fields := []string{}
			for _, v := range e.Validations {
				fields = append(fields, v.Field)
			}
			if status != http.StatusBadRequest || strings.Join(fields, " ") != "activity[1].kind activity[2].workspace_id activity[3].at activity[4].workspace_id" {
				t.Errorf("a bad report: %d %s", status, body)
			}
			want("after a refused report", lastUsed(t, env, alice, "dev"), now.Add(30*time.Second))
			many := make([]protocol.ProxyActivity, protocol.MaxActivityItems+1)
			for i := range many {
				many[i] = protocol.ProxyActivity{WorkspaceID: dev.ID, Kind: protocol.ActivitySSH, At: later}
			}
			status, body = call(t, env, k1, "POST", protocol.ProxyActivityPath, protocol.ProxyActivityRequest{Activity: many})
			if e := apiError(t, body); status != http.StatusBadRequest || len(e.Validations) != 1 || e.Validations[0].Field != "activity" {
				t.Errorf("%d items: %d %s", len(many), status, body)
			}
			report(1, many[:protocol.MaxActivityItems]...)
			want(fmt.Sprintf("%d items", protocol.MaxActivityItems), lastUsed(t, env, alice, "dev"), later)
			mustCall(t, env, k1, "POST", protocol.ProxyActivityPath, `{"activity":[{"workspace_id":"`+strings.Repeat("a", 256<<10)+`"}]}`, http.StatusRequestEntityTooLarge, nil)
			mustCall(t, env, alice, "POST", protocol.ProxyActivityPath, protocol.ProxyActivityRequest{}, http.StatusUnauthorized, nil)
		})
	}
}
