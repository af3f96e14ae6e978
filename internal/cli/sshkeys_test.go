package cli

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/servertest"
)

// seededKey is the ed25519 public key of a fixed seed, in authorized_keys form with comment (none
// if empty), and its fingerprint: the same in every run, for golden files.
func seededKey(t *testing.T, seed byte, comment string) (line, fingerprint string) {
	t.Helper()
	pk, err := ssh.NewPublicKey(ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, ed25519.SeedSize)).Public())
	if err != nil {
		t.Fatal(err)
	}
	line = strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pk)))
	if comment != "" {
		line += " " + comment
	}
	return line + "\n", ssh.FingerprintSHA256(pk)
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestSSHKeysEndToEnd runs the ssh-keys commands against the real server, with a home directory of
// the test's.
func TestSSHKeysEndToEnd(t *testing.T) {
	env := servertest.New(t)
	admin := newCLI(t, map[string]string{"HANGAR_URL": env.URL, "HANGAR_TOKEN": env.AdminToken})
	var alice sdk.User
	if err := json.Unmarshal([]byte(admin.ok("users", "create", "alice", "-o", "json")), &alice); err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	c := newCLI(t, map[string]string{"HANGAR_URL": env.URL, "HANGAR_TOKEN": alice.Token, "HOME": home})
	ssh := filepath.Join(home, ".ssh")

	if got := c.ok("ssh-keys", "list"); got != "No SSH keys.\n" {
		t.Errorf("ssh-keys list with none: %q", got)
	}
	if got := c.fail("ssh-keys", "add"); got != "error: no public key in "+ssh+" (looked for id_ed25519.pub, id_ecdsa.pub, id_rsa.pub): give its file (hangar ssh-keys add FILE), or make a key with ssh-keygen -t ed25519\n" {
		t.Errorf("ssh-keys add without a key: %q", got)
	}

	// Without FILE: id_ed25519.pub, else id_ecdsa.pub, else id_rsa.pub; it says which it took.
	ecdsaLine, ecdsaFP := seededKey(t, 2, "alice@desktop")
	rsaLine, rsaFP := seededKey(t, 3, "old")
	writeFile(t, filepath.Join(ssh, "id_ecdsa.pub"), ecdsaLine)
	writeFile(t, filepath.Join(ssh, "id_rsa.pub"), rsaLine)
	env.Clock.Advance(time.Minute)
	r := c.run("ssh-keys", "add")
	if r.code != 0 || r.stderr != "Using "+filepath.Join(ssh, "id_ecdsa.pub")+"\n" || r.stdout != `Added SSH key "alice@desktop" (`+ecdsaFP+").\n" {
		t.Errorf("ssh-keys add with id_ecdsa.pub and id_rsa.pub: %+v", r)
	}
	laptopLine, laptopFP := seededKey(t, 1, "alice@laptop")
	writeFile(t, filepath.Join(ssh, "id_ed25519.pub"), laptopLine)
	env.Clock.Advance(time.Minute)
	r = c.run("ssh-keys", "add")
	if r.code != 0 || r.stderr != "Using "+filepath.Join(ssh, "id_ed25519.pub")+"\n" || r.stdout != `Added SSH key "alice@laptop" (`+laptopFP+").\n" {
		t.Errorf("ssh-keys add with id_ed25519.pub: %+v", r)
	}
	// FILE, --name, standard input, JSON.
	env.Clock.Advance(time.Minute)
	if got := c.ok("ssh-keys", "add", filepath.Join(ssh, "id_rsa.pub"), "--name", "work"); got != `Added SSH key "work" (`+rsaFP+").\n" {
		t.Errorf("ssh-keys add FILE --name: %q", got)
	}
	c.stdin, _ = seededKey(t, 4, "")
	env.Clock.Advance(time.Minute)
	var piped sdk.SSHKey
	if err := json.Unmarshal([]byte(c.ok("ssh-keys", "add", "-", "-o", "json")), &piped); err != nil || piped.Name != "ssh-ed25519" || !strings.HasPrefix(piped.Fingerprint, "SHA256:") {
		t.Errorf("ssh-keys add - -o json: %+v, %v", piped, err)
	}

	// Refusals: the server's message, fields named; a private key never leaves the machine.
	if got := c.fail("ssh-keys", "add", filepath.Join(ssh, "id_ed25519.pub")); got != "error: this key is already registered: a key can be registered once, since it identifies its user; if it is one of yours, 'hangar ssh-keys list' shows it, else use another key\n" {
		t.Errorf("a key added twice: %q", got)
	}
	writeFile(t, filepath.Join(ssh, "id_ed25519"), "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----\n")
	if got := c.fail("ssh-keys", "add", filepath.Join(ssh, "id_ed25519")); got != "error: "+filepath.Join(ssh, "id_ed25519")+" is a private key, which must never be shared: give the public key, the .pub file beside it\n" {
		t.Errorf("a private key: %q", got)
	}
	c.stdin = "ssh-ed25519 nonsense\n"
	if got := c.fail("ssh-keys", "add", "-"); !strings.HasPrefix(got, "error: invalid request\n  public_key: must be an SSH public key in authorized_keys form") {
		t.Errorf("not a key: %q", got)
	}
	if got := c.fail("ssh-keys", "add", filepath.Join(ssh, "id_rsa.pub"), "--name", "a\tb"); got != "error: invalid request\n  name: must not contain control characters (newlines, tabs, ...)\n" {
		t.Errorf("a bad name: %q", got)
	}
	if got := c.fail("ssh-keys", "add", "a.pub", "b.pub"); got != "error: hangar ssh-keys add takes at most one file, got 2 arguments\nRun 'hangar ssh-keys add --help' for usage.\n" {
		t.Errorf("two files: %q", got)
	}
	if got := c.fail("ssh-keys", "add", filepath.Join(ssh, "nope.pub")); got != "error: read the public key: open "+filepath.Join(ssh, "nope.pub")+": no such file or directory\n" {
		t.Errorf("a missing file: %q", got)
	}

	// The list, as a table and, like every list command's, as a JSON array.
	golden(t, "output/ssh-keys-list.golden", c.ok("ssh-keys", "list"))
	var keys []sdk.SSHKey
	if err := json.Unmarshal([]byte(c.ok("ssh-keys", "list", "-o", "json")), &keys); err != nil || len(keys) != 4 || keys[3] != piped {
		t.Errorf("ssh-keys list -o json: %+v, %v", keys, err)
	}

	// Removal by name, fingerprint or id; a name two keys share is not enough.
	if got := c.ok("ssh-keys", "remove", "work"); got != "Removed SSH key work.\n" {
		t.Errorf("ssh-keys remove NAME: %q", got)
	}
	c.ok("ssh-keys", "remove", ecdsaFP)
	c.ok("ssh-keys", "remove", piped.ID)
	if got := c.fail("ssh-keys", "remove", "work"); got != "error: you have no SSH key \"work\" (name it by its id or its fingerprint, SHA256:...)\n" {
		t.Errorf("ssh-keys remove of a removed key: %q", got)
	}
	c.ok("ssh-keys", "add", filepath.Join(ssh, "id_rsa.pub"), "--name", "alice@laptop")
	if got := c.fail("ssh-keys", "remove", "alice@laptop"); got != "error: 2 of your SSH keys are named \"alice@laptop\": remove one by its fingerprint (see hangar ssh-keys list)\n" {
		t.Errorf("ssh-keys remove of a shared name: %q", got)
	}
	c.ok("ssh-keys", "remove", laptopFP)
	if !strings.Contains(rsaFP, "/") {
		t.Fatalf("the test needs a fingerprint holding '/', got %s", rsaFP)
	}
	if got := c.ok("ssh-keys", "remove", rsaFP); got != "Removed SSH key "+rsaFP+".\n" {
		t.Errorf("ssh-keys remove FINGERPRINT (with '/'): %q", got)
	}
	if got := c.ok("ssh-keys", "list"); got != "No SSH keys.\n" {
		t.Errorf("ssh-keys list after removing every key:\n%s", got)
	}
}

// TestShowLastUsed: hangar show says when the workspace was last used through the proxy.
func TestShowLastUsed(t *testing.T) {
	env := servertest.New(t)
	admin := newCLI(t, map[string]string{"HANGAR_URL": env.URL, "HANGAR_TOKEN": env.AdminToken})
	var agent sdk.Agent
	if err := json.Unmarshal([]byte(admin.ok("agents", "create", "eu", "-o", "json")), &agent); err != nil {
		t.Fatal(err)
	}
	var ws sdk.Workspace
	if err := json.Unmarshal([]byte(admin.ok("create", "dev", "--agent", "eu", "-o", "json")), &ws); err != nil {
		t.Fatal(err)
	}
	if got := admin.ok("show", "dev"); !strings.Contains(got, "\nLast used:           never\n") {
		t.Errorf("show before any use:\n%s", got)
	}
	body, _ := json.Marshal(protocol.ProxyActivityRequest{Activity: []protocol.ProxyActivity{
		{WorkspaceID: ws.ID, Kind: protocol.ActivitySSH, At: servertest.Start.Add(30 * time.Second)},
	}})
	req, _ := http.NewRequest("POST", env.URL+protocol.ProxyActivityPath, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+agent.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("activity report: %d", resp.StatusCode)
	}
	if got := admin.ok("show", "dev"); !strings.Contains(got, "\nLast used:           2026-01-01 05:00:30 UTC\n") {
		t.Errorf("show after an SSH session:\n%s", got)
	}
}
