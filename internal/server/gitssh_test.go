package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/hangar-dev/hangar/internal/backend/tfbackend"
	"github.com/hangar-dev/hangar/internal/externalauth"
	"github.com/hangar-dev/hangar/internal/gitcred"
	"github.com/hangar-dev/hangar/internal/gitssh"
	"github.com/hangar-dev/hangar/internal/projectclone"
	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/server"
	"github.com/hangar-dev/hangar/internal/servertest"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/testutil/forgetest"
	"github.com/hangar-dev/hangar/internal/wshelper"
)

// withGitSSH gives the server git SSH keys sealed under the test key file.
func withGitSSH(t *testing.T) servertest.Option {
	keys, err := externalauth.ParseKeys([]byte(testKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	return func(o *server.Options) { o.GitSSH = &gitssh.Service{Keys: keys, Store: o.Store, Clock: o.Clock} }
}

// gitSSHSign asks for a signature as the workspace helper's agent does.
func gitSSHSign(t *testing.T, env *servertest.Env, token string, key ssh.PublicKey, data []byte) (int, *ssh.Signature, sdk.Error) {
	t.Helper()
	req := sdk.GitSSHSignRequest{Data: data}
	if key != nil {
		req.PublicKey = key.Marshal()
	}
	status, b := call(t, env, token, "POST", protocol.GitSSHSignPath, req)
	if status != http.StatusOK {
		return status, nil, apiError(t, b)
	}
	var sig sdk.GitSSHSignature
	if err := json.Unmarshal(b, &sig); err != nil {
		t.Fatal(err)
	}
	return status, &ssh.Signature{Format: sig.Format, Blob: sig.Blob}, sdk.Error{}
}

func parseGitSSHKey(t *testing.T, k sdk.GitSSHKey) ssh.PublicKey {
	t.Helper()
	pub, comment, _, _, err := ssh.ParseAuthorizedKey([]byte(k.PublicKey))
	if err != nil || pub.Type() != ssh.KeyAlgoED25519 || ssh.FingerprintSHA256(pub) != k.Fingerprint || !strings.HasPrefix(comment, "hangar:") {
		t.Fatalf("git SSH key %+v: %v", k, err)
	}
	return pub
}

// TestGitSSHKey: a user's key is made once and kept; a workspace's helper gets signatures with
// its owner's key only (which verify with the public key the user sees), never with another
// user's; a rotation (audited) changes the key and the old one signs no more; a suspension
// refuses signatures; the private key is sealed at rest; without a key file the feature is
// refused with the reason.
func TestGitSSHKey(t *testing.T) {
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) { testGitSSHKey(t, engine) })
	}
}

func testGitSSHKey(t *testing.T, engine string) {
	ctx := context.Background()
	ae := newAgentEnv(t, engine, withGitSSH(t))
	env, helper := ae.Env, ae.job.AgentToken
	bob := createUser(t, env, "bob")

	var k1, again, bobs sdk.GitSSHKey
	mustCall(t, env, ae.dev, "GET", "/api/v1/users/me/gitssh", nil, http.StatusOK, &k1)
	mustCall(t, env, ae.dev, "GET", "/api/v1/users/me/gitssh", nil, http.StatusOK, &again)
	if again.PublicKey != k1.PublicKey || !strings.HasSuffix(k1.PublicKey, " hangar:dev") || !k1.CreatedAt.Equal(servertest.Start) {
		t.Fatalf("the key changed between reads, or lacks its comment: %+v then %+v", k1, again)
	}
	pub1 := parseGitSSHKey(t, k1)
	mustCall(t, env, bob, "GET", "/api/v1/users/me/gitssh", nil, http.StatusOK, &bobs)
	bobPub := parseGitSSHKey(t, bobs)
	if bobs.Fingerprint == k1.Fingerprint {
		t.Fatal("two users got the same key")
	}

	// The helper lists its owner's key and gets signatures that verify with it.
	var listed sdk.GitSSHKey
	mustCall(t, env, helper, "GET", protocol.GitSSHKeyPath, nil, http.StatusOK, &listed)
	if listed.PublicKey != k1.PublicKey {
		t.Fatalf("the helper lists %q, want its owner's %q", listed.PublicKey, k1.PublicKey)
	}
	data := []byte("session id and userauth request")
	status, sig, e := gitSSHSign(t, env, helper, pub1, data)
	if status != http.StatusOK {
		t.Fatalf("sign: %d %+v", status, e)
	}
	if err := pub1.Verify(data, sig); err != nil {
		t.Fatalf("the signature does not verify with the owner's key: %v", err)
	}
	if bobPub.Verify(data, sig) == nil {
		t.Fatal("the signature verifies with bob's key")
	}
	// Another user's key: never.
	if status, _, e := gitSSHSign(t, env, helper, bobPub, data); status != http.StatusConflict || !strings.Contains(e.Message, "not the user's current git SSH key") {
		t.Fatalf("sign with bob's key: %d %+v, want 409", status, e)
	}
	// A user's token is not a helper's; no token at all; bad input names its field.
	if status, _, _ := gitSSHSign(t, env, bob, bobPub, data); status != http.StatusUnauthorized {
		t.Fatalf("sign with a user's token: %d, want 401", status)
	}
	if status, _, _ := gitSSHSign(t, env, "", pub1, data); status != http.StatusUnauthorized {
		t.Fatalf("sign without a token: %d, want 401", status)
	}
	if status, _, e := gitSSHSign(t, env, helper, pub1, nil); status != http.StatusBadRequest || !strings.Contains(string(mustJSON(t, e)), `"data"`) {
		t.Fatalf("sign without data: %d %+v, want 400 naming data", status, e)
	}
	if status, _, e := gitSSHSign(t, env, helper, pub1, make([]byte, gitssh.MaxSignData+1)); status != http.StatusBadRequest || !strings.Contains(string(mustJSON(t, e)), `"data"`) {
		t.Fatalf("sign too much: %d %+v, want 400 naming data", status, e)
	}

	// At rest the private key is sealed: the row opens only with the key file and the user's id.
	row, err := env.Store.GitSSHKey(ctx, userNamed(t, env.Store, "dev").ID)
	if err != nil || row.KeyID == "" || row.PublicKey+" hangar:dev" != k1.PublicKey {
		t.Fatalf("stored key: %+v, %v", row, err)
	}
	keys, _ := externalauth.ParseKeys([]byte(testKeyFile))
	if _, err := keys.Open(row.KeyID, row.PrivateKey, "hangar git ssh key v1\x00"+userNamed(t, env.Store, "bob").ID+"\x00"+row.PublicKey); err == nil {
		t.Fatal("dev's sealed key opens as bob's")
	}

	// A rotation: a new key, audited; the old key signs no more, the new one does.
	env.Clock.Advance(time.Hour)
	var k2 sdk.GitSSHKey
	mustCall(t, env, ae.dev, "POST", "/api/v1/users/me/gitssh/rotate", nil, http.StatusOK, &k2)
	pub2 := parseGitSSHKey(t, k2)
	if k2.Fingerprint == k1.Fingerprint || !k2.CreatedAt.Equal(servertest.Start.Add(time.Hour)) {
		t.Fatalf("rotation: %+v after %+v", k2, k1)
	}
	if status, _, e := gitSSHSign(t, env, helper, pub1, data); status != http.StatusConflict || !strings.Contains(e.Message, "rotated") {
		t.Fatalf("sign with the rotated key: %d %+v, want 409", status, e)
	}
	if status, sig, e := gitSSHSign(t, env, helper, pub2, data); status != http.StatusOK || pub2.Verify(data, sig) != nil {
		t.Fatalf("sign with the new key: %d %+v", status, e)
	}
	var audit struct {
		Entries []sdk.AuditEntry `json:"entries"`
	}
	mustCall(t, env, env.AdminToken, "GET", "/api/v1/audit?action=git_ssh.rotate", nil, http.StatusOK, &audit)
	if len(audit.Entries) != 1 || audit.Entries[0].Actor != "dev" || audit.Entries[0].TargetName != "dev" || audit.Entries[0].Details["fingerprint"] != k2.Fingerprint {
		t.Fatalf("audit of the rotation: %+v", audit.Entries)
	}

	// A suspended owner: no key listed, no signature, at the next request.
	mustCall(t, env, env.AdminToken, "PATCH", "/api/v1/users/dev", map[string]any{"suspended": true}, http.StatusOK, nil)
	if status, _, e := gitSSHSign(t, env, helper, pub2, data); status != http.StatusForbidden || !strings.Contains(e.Message, "dev is suspended") {
		t.Fatalf("sign for a suspended owner: %d %+v, want 403", status, e)
	}
	if status, b := call(t, env, helper, "GET", protocol.GitSSHKeyPath, nil); status != http.StatusForbidden {
		t.Fatalf("list for a suspended owner: %d %s, want 403", status, b)
	}
	mustCall(t, env, env.AdminToken, "PATCH", "/api/v1/users/dev", map[string]any{"suspended": false}, http.StatusOK, nil)
	if status, _, e := gitSSHSign(t, env, helper, pub2, data); status != http.StatusOK {
		t.Fatalf("sign once reinstated: %d %+v", status, e)
	}

	// Without a key file: refused, saying why.
	plain := servertest.NewWith(t, engine)
	status, b := call(t, plain, plain.AdminToken, "GET", "/api/v1/users/me/gitssh", nil)
	if e := apiError(t, b); status != http.StatusNotFound || !strings.Contains(e.Message+e.Detail, "--external-auth-key-file") {
		t.Fatalf("without a key file: %d %s", status, b)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestGitCloneOverSSHWithTheHelpersAgent: the real git, in a workspace helper's command (Run,
// the environment it gives the container), clones over SSH from the test forge with its owner's
// git SSH key, the private half of which stays on the server (the helper's agent asks it to
// sign); after a rotation the forge refuses the clone until the new key is added there.
func TestGitCloneOverSSHWithTheHelpersAgent(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("git is needed (scripts/install-deps): %v", err)
	}
	ae := newAgentEnv(t, "sqlite", withGitSSH(t))
	env := ae.Env
	f := forgetest.New(t, forgetest.Options{})
	f.AddUser(forgetest.User{Login: "dev"})
	f.CreateRepo("dev", "app", true, map[string]string{"README.md": "# app\n"})
	var k sdk.GitSSHKey
	mustCall(t, env, ae.dev, "GET", "/api/v1/users/me/gitssh", nil, http.StatusOK, &k)
	f.AddSSHKey("dev", k.PublicKey)

	dir := t.TempDir()
	known, bin := filepath.Join(dir, "known_hosts"), filepath.Join(dir, "bin")
	writeFile(t, known, f.KnownHosts(), 0o600)
	// The test's ssh: the system's, with the forge's host key and none of this machine's ssh
	// config; the options git adds (the helper's IdentityAgent) pass through.
	sshPath, err := exec.LookPath("ssh")
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(bin, "ssh"), "#!/bin/sh\nexec "+sshPath+" -F none -o BatchMode=yes -o StrictHostKeyChecking=yes -o UserKnownHostsFile="+known+` "$@"`+"\n", 0o755)
	clone := func(dest string) (int, string) {
		t.Helper()
		var out lockedBuffer
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		code, err := wshelper.Run(ctx, wshelper.Config{ServerURL: env.URL, Token: ae.job.AgentToken, StateDir: filepath.Join(dir, "state"),
			Command: []string{"git", "clone", "-q", f.SSHCloneURL("dev", "app"), filepath.Join(dir, dest)},
			Env:     []string{"PATH=" + bin + ":" + os.Getenv("PATH"), "HOME=" + dir, "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0", "LANG=C"},
			Stdout:  &out, Stderr: &out, Signals: make(chan os.Signal)})
		if err != nil {
			t.Fatalf("the helper: %v", err)
		}
		return code, out.String()
	}
	if code, out := clone("one"); code != 0 {
		t.Fatalf("git clone over SSH with the owner's key: exit %d\n%s", code, out)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "one", "README.md")); err != nil || string(b) != "# app\n" {
		t.Fatalf("the clone's README.md: %q %v", b, err)
	}

	var k2 sdk.GitSSHKey
	mustCall(t, env, ae.dev, "POST", "/api/v1/users/me/gitssh/rotate", nil, http.StatusOK, &k2)
	if code, out := clone("two"); code == 0 || !strings.Contains(out, "Permission denied (publickey)") {
		t.Fatalf("git clone after a rotation, the new key not at the forge: exit %d\n%s", code, out)
	}
	f.AddSSHKey("dev", k2.PublicKey)
	if code, out := clone("three"); code != 0 {
		t.Fatalf("git clone with the new key added: exit %d\n%s", code, out)
	}
}

func writeFile(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

// oaGitSSH goes through the git SSH endpoints with the document's checker.
func oaGitSSH(t *testing.T, c *oaChecker, dev string) {
	t.Helper()
	env := c.env
	var ws struct {
		ID string `json:"id"`
	}
	c.decode(c.do(dev, "POST", "/api/v1/workspaces", map[string]any{"name": "tfssh", "template": "tf"}, 201, true), &ws)
	helper := protocol.WorkspaceAgentTokenPrefix + "openapi-gitssh"
	if err := env.Store.CreateWorkspaceAgentToken(context.Background(), store.WorkspaceAgentToken{Hash: tfbackend.HashAgentToken(helper),
		WorkspaceID: ws.ID, BuildNumber: 1, CreatedAt: env.Clock.Now()}); err != nil {
		t.Fatal(err)
	}
	var k sdk.GitSSHKey
	c.decode(c.do(dev, "GET", "/api/v1/users/me/gitssh", nil, 200, true), &k)
	c.do("", "GET", "/api/v1/users/me/gitssh", nil, 401, false)
	c.do(helper, "GET", protocol.GitSSHKeyPath, nil, 200, true)
	c.do(dev, "GET", protocol.GitSSHKeyPath, nil, 401, false)
	pub := parseGitSSHKey(t, k)
	c.do(helper, "POST", protocol.GitSSHSignPath, map[string]any{"public_key": pub.Marshal(), "data": []byte("to sign")}, 200, true)
	c.do(helper, "POST", protocol.GitSSHSignPath, map[string]any{"data": []byte("to sign")}, 200, true)
	c.do(helper, "POST", protocol.GitSSHSignPath, map[string]any{"public_key": []byte("another key"), "data": []byte("to sign")}, 409, true)
	c.do(helper, "POST", protocol.GitSSHSignPath, map[string]any{"public_key": pub.Marshal()}, 400, false)
	c.do(dev, "POST", protocol.GitSSHSignPath, map[string]any{"data": []byte("to sign")}, 401, false)
	c.do(dev, "POST", "/api/v1/users/me/gitssh/rotate", nil, 200, true)
	c.do(helper, "POST", protocol.GitSSHSignPath, map[string]any{"public_key": pub.Marshal(), "data": []byte("to sign")}, 409, true)
}

// withForgeSSH configures forge as a Gitea whose SSH host the server's forges serve, with its
// host key in ssh_known_hosts.
func withForgeSSH(t *testing.T, f *forgetest.Forge) servertest.Option {
	cfg := fmt.Sprintf("providers:\n  - {id: forge, type: gitea, client_id: hangar, client_secret_env: S, base_url: %q, hosts: [%q], ssh_known_hosts: %q}\n",
		f.HTTPURL(), "ssh://"+f.SSHAddr(), f.KnownHosts())
	providers, err := externalauth.Decode([]byte(cfg), func(string) (string, bool) { return "s", true }, os.ReadFile)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := externalauth.ParseKeys([]byte(testKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	return func(o *server.Options) {
		o.ExternalAuth = externalauth.New(externalauth.Options{Providers: providers, Keys: keys, Store: o.Store, Clock: o.Clock, Log: o.Logger,
			CallbackURL: func(id string) string { return "http://127.0.0.1/external-auth/" + id + "/callback" }})
	}
}

// TestProjectCloneOverSSHThroughTheServer: the clone at a workspace's start (project-clone, with
// its helper token) clones an SSH remote from the test forge with the owner's git SSH key, signed
// by this server, checking the forge's host key against the known hosts the server gives from the
// forge's ssh_known_hosts. Once the owner is suspended, the clone stops with the server's words.
func TestProjectCloneOverSSHThroughTheServer(t *testing.T) {
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			f := forgetest.New(t, forgetest.Options{})
			f.AddUser(forgetest.User{Login: "dev"})
			f.CreateRepo("dev", "app", true, map[string]string{"README.md": "# app\n"})
			ae := newAgentEnv(t, engine, withGitSSH(t), withForgeSSH(t, f))
			env := ae.Env
			var k sdk.WorkspaceGitSSH
			mustCall(t, env, ae.job.AgentToken, "GET", protocol.GitSSHKeyPath, nil, http.StatusOK, &k)
			if k.KnownHosts != f.KnownHosts()+"\n" && k.KnownHosts != f.KnownHosts() {
				t.Fatalf("the helper's known hosts: %q, want the forge's %q", k.KnownHosts, f.KnownHosts())
			}
			f.AddSSHKey("dev", k.PublicKey)
			clone := func() (string, error) {
				root := t.TempDir()
				err := projectclone.Clone(context.Background(), root, []projectclone.Project{{Name: "app", Path: "app", Remotes: map[string]string{"origin": f.SSHCloneURL("dev", "app")}}},
					projectclone.Options{SSH: &gitcred.SSHServer{BaseURL: env.URL, Token: ae.job.AgentToken}}, io.Discard)
				b, _ := os.ReadFile(filepath.Join(root, "app", "README.md"))
				return string(b), err
			}
			if readme, err := clone(); err != nil || readme != "# app\n" {
				t.Fatalf("project-clone over SSH: %q, %v", readme, err)
			}
			mustCall(t, env, env.AdminToken, "PATCH", "/api/v1/users/dev", map[string]any{"suspended": true}, http.StatusOK, nil)
			if _, err := clone(); err == nil || !strings.Contains(err.Error(), "dev is suspended") {
				t.Fatalf("project-clone for a suspended owner: %v", err)
			}
		})
	}
}
