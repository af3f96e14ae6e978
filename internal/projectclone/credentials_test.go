package projectclone

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hangar-dev/hangar/internal/gitcred"
	"github.com/hangar-dev/hangar/internal/testutil/forgetest"
	"github.com/hangar-dev/hangar/internal/testutil/gitcredtest"
)

// hangarAnswers stands for the Hangar server's git-credentials endpoint (gitcredtest): it answers
// each question with answer, and asked lists them as "<Authorization> <protocol>://<host>/<path>".
func hangarAnswers(t *testing.T, answer func(gitcred.Request) (int, any)) (url string, asked func() []string) {
	t.Helper()
	s := gitcredtest.New(t, answer)
	return s.URL, func() []string {
		var out []string
		for _, a := range s.Asked() {
			out = append(out, a.Authorization+" "+a.Request.Protocol+"://"+a.Request.Host+"/"+a.Request.Path)
		}
		return out
	}
}

// The init container clones the owner's private repository with the credential the server gives
// for it, read through the pod's environment (the helper's token file and the server's URL).
func TestClonePrivateWithTheOwnersCredential(t *testing.T) {
	forge := forgetest.New(t, forgetest.Options{})
	forge.AddUser(forgetest.User{Login: "alice", FullName: "Alice", Email: "alice@example.com"})
	forge.CreateRepo("alice", "app", true, map[string]string{"README.md": "private\n"})
	token := forge.AddToken("alice")
	server, asked := hangarAnswers(t, func(r gitcred.Request) (int, any) {
		return http.StatusOK, gitcred.Credential{Username: "oauth2", Password: token}
	})
	tokenFile := filepath.Join(t.TempDir(), "helper-token")
	if err := os.WriteFile(tokenFile, []byte("hwa_k1_ws.mac\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	projects, _ := json.Marshal([]Project{{Name: "app", Path: "app", Remotes: map[string]string{"origin": forge.CloneURL("alice", "app")}}})
	env := map[string]string{"PROJECTS_ROOT": root, "HANGAR_PROJECTS": string(projects), "HANGAR_HELPER_SERVER_URL": server, "HANGAR_HELPER_TOKEN_FILE": tokenFile}
	var out, errOut bytes.Buffer
	if code := Main(context.Background(), func(k string) string { return env[k] }, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s%s", code, out.String(), errOut.String())
	}
	if b, err := os.ReadFile(filepath.Join(root, "app", "README.md")); err != nil || string(b) != "private\n" {
		t.Fatalf("the clone's README: %q, %v", b, err)
	}
	u := strings.TrimPrefix(forge.CloneURL("alice", "app"), "http://")
	if got := asked(); len(got) != 1 || got[0] != "Bearer hwa_k1_ws.mac http://"+u {
		t.Fatalf("the server was asked %q", got)
	}
	if strings.Contains(out.String()+errOut.String(), token) {
		t.Fatal("the forge token is in the container's log")
	}
}

// Not linked: the clone stops with the server's words (what `kubectl logs` and the workspace's
// error show). No forge for the host: the clone goes on without credentials, and a private
// repository then fails as it would anyway.
func TestCloneTellsWhyThereIsNoCredential(t *testing.T) {
	forge := forgetest.New(t, forgetest.Options{})
	forge.AddUser(forgetest.User{Login: "alice", FullName: "Alice", Email: "alice@example.com"})
	forge.CreateRepo("alice", "app", true, map[string]string{"README.md": "private\n"})
	forge.CreateRepo("alice", "pub", false, map[string]string{"README.md": "public\n"})
	for _, tc := range []struct {
		name, repo string
		status     int
		message    string
		wantErr    string // "": the clone succeeds
	}{
		{"not linked", "app", http.StatusConflict, "you have not linked your account on forge: run `hangar external-auth link forge`", "hangar external-auth link forge"},
		{"no forge, public", "pub", http.StatusNotFound, "no forge configured serves this host", ""},
		{"no forge, private", "app", http.StatusNotFound, "no forge configured serves this host", "authentication required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			server, _ := hangarAnswers(t, func(gitcred.Request) (int, any) {
				return tc.status, map[string]string{"code": "x", "message": tc.message}
			})
			var log bytes.Buffer
			err := Clone(context.Background(), t.TempDir(), []Project{{Name: "p", Path: "p", Remotes: map[string]string{"origin": forge.CloneURL("alice", tc.repo)}}},
				Options{Ask: gitcred.AskServer(nil, server, "hwa_x")}, &log)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("clone: %v", err)
				}
				if !strings.Contains(log.String(), "without credentials: "+tc.message) {
					t.Errorf("log %q does not say why it clones without credentials", log.String())
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("clone: %v; want an error with %q", err, tc.wantErr)
			}
		})
	}
}
