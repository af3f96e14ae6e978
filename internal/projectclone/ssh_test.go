package projectclone

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/hangar-dev/hangar/internal/gitcred"
	"github.com/hangar-dev/hangar/internal/testutil/forgetest"
	"github.com/hangar-dev/hangar/internal/testutil/gitcredtest"
)

func newSigner(t *testing.T) ssh.Signer {
	t.Helper()
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	s, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func authorizedKey(s ssh.Signer) string {
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(s.PublicKey())))
}

// The init container clones an SSH remote from the test forge's SSH git with the owner's key,
// whose signatures the server makes (asked with the helper's token read from the pod's file), and
// the forge's host key checked against the known hosts the server gives. The forge saw alice over
// SSH; nothing was asked of git-credentials.
func TestCloneOverSSHWithTheOwnersKey(t *testing.T) {
	forge := forgetest.New(t, forgetest.Options{})
	forge.AddUser(forgetest.User{Login: "alice", FullName: "Alice", Email: "alice@example.com"})
	head := forge.CreateRepo("alice", "app", true, map[string]string{"README.md": "private\n"})
	forge.Commit("alice", "app", "on a branch", map[string]string{"BRANCH.md": "x\n"}) // main moves on
	key := newSigner(t)
	forge.AddSSHKey("alice", authorizedKey(key))
	srv := gitcredtest.New(t, func(gitcred.Request) (int, any) { return http.StatusNotFound, map[string]string{"message": "no forge"} })
	srv.SetGitSSH(key, "# the forges' host keys\n"+forge.KnownHosts(), "")
	tokenFile := filepath.Join(t.TempDir(), "helper-token")
	if err := os.WriteFile(tokenFile, []byte("hwa_k1_ws.mac\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	projects, _ := json.Marshal([]Project{{Name: "app", Path: "app", Remotes: map[string]string{"origin": forge.SSHCloneURL("alice", "app")}, Revision: head}})
	env := map[string]string{"PROJECTS_ROOT": root, "HANGAR_PROJECTS": string(projects), "HANGAR_HELPER_SERVER_URL": srv.URL, "HANGAR_HELPER_TOKEN_FILE": tokenFile}
	var out, errOut bytes.Buffer
	if code := Main(context.Background(), func(k string) string { return env[k] }, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s%s", code, out.String(), errOut.String())
	}
	if b, err := os.ReadFile(filepath.Join(root, "app", "README.md")); err != nil || string(b) != "private\n" {
		t.Fatalf("the clone's README: %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(root, "app", "BRANCH.md")); !os.IsNotExist(err) {
		t.Fatalf("the clone is not at the revision asked (%s): BRANCH.md %v", head, err)
	}
	if !slices.ContainsFunc(forge.GitAccesses(), func(a forgetest.GitAccess) bool {
		return a.Transport == "ssh" && a.User == "alice" && a.Repo == "alice/app" && a.Status == http.StatusOK
	}) {
		t.Fatalf("the forge did not serve alice/app to alice over SSH: %+v", forge.GitAccesses())
	}
	asked := srv.SSHAsked()
	if len(asked) < 2 || asked[0] != "GET /api/v1/workspace-agent/gitssh Bearer hwa_k1_ws.mac" ||
		!slices.Contains(asked, "POST /api/v1/workspace-agent/gitssh/sign Bearer hwa_k1_ws.mac") {
		t.Fatalf("the server was asked %q; want the key, then signatures, with the helper's token", asked)
	}
	if len(srv.Asked()) != 0 {
		t.Fatalf("git-credentials was asked for an SSH remote: %+v", srv.Asked())
	}
}

// What stops an SSH clone says why: a forge host key unknown or different (never trusted on first
// use), a key the forge does not have, the server's refusal. Nothing is left in the projects root.
func TestCloneOverSSHRefusals(t *testing.T) {
	forge := forgetest.New(t, forgetest.Options{})
	forge.AddUser(forgetest.User{Login: "alice", FullName: "Alice", Email: "alice@example.com"})
	forge.CreateRepo("alice", "app", true, map[string]string{"README.md": "private\n"})
	key := newSigner(t)
	forge.AddSSHKey("alice", authorizedKey(key))
	host := strings.SplitN(forge.KnownHosts(), " ", 2)[0] // [127.0.0.1]:PORT
	for _, tc := range []struct {
		name       string
		key        ssh.Signer
		knownHosts string
		refuse     string
		want       string
	}{
		{"unknown host", key, "", "", "the SSH host " + host + " is not among the forges' known hosts"},
		{"another host key", key, host + " " + authorizedKey(newSigner(t)) + "\n", "", "which is not the forge's known one: refused"},
		{"key not at the forge", newSigner(t), forge.KnownHosts(), "", "the forge refused the workspace owner's git SSH key (add it to your forge account: `hangar gitssh` prints it)"},
		{"owner suspended", key, forge.KnownHosts(), "user suspended: alice is suspended", "the workspace owner's git SSH key: the Hangar server refused: user suspended: alice is suspended"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := gitcredtest.New(t, func(gitcred.Request) (int, any) { return http.StatusNotFound, map[string]string{"message": "no forge"} })
			srv.SetGitSSH(tc.key, tc.knownHosts, tc.refuse)
			root := t.TempDir()
			err := Clone(context.Background(), root, []Project{{Name: "app", Path: "app", Remotes: map[string]string{"origin": forge.SSHCloneURL("alice", "app")}}},
				Options{Ask: gitcred.AskServer(nil, srv.URL, "hwa_x"), SSH: &gitcred.SSHServer{BaseURL: srv.URL, Token: "hwa_x"}}, &bytes.Buffer{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("clone: %v\nwant an error with %q", err, tc.want)
			}
			if entries, _ := os.ReadDir(root); len(entries) != 0 {
				t.Fatalf("left in the projects root: %v", entries)
			}
		})
	}
}
