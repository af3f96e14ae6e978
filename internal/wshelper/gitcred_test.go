//go:build unix

package wshelper

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hangar-dev/hangar/internal/gitcred"
	"github.com/hangar-dev/hangar/internal/testutil/gitcredtest"
)

// gitCredentialFill runs the real `git credential fill` for url with the environment the helper
// gives a workspace's processes, git's helper being this test binary (TestMain runs
// GitCredentialMain for it): what git would get for a clone or a push.
func gitCredentialFill(t *testing.T, h *gitcredtest.Server, url string) (stdout, stderr string, err error) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("git is needed (scripts/install-deps): %v", err)
	}
	state := t.TempDir()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ln, sock, err := listenGitCredentials(state)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		serveGitCredentials(ctx, ln, gitcred.AskServer(nil, h.URL, "hwa_test-token"), slog.New(slog.DiscardHandler))
	}()
	t.Cleanup(func() { cancel(); ln.Close(); <-done })

	home := t.TempDir()
	env := []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0", "GIT_ASKPASS=", "SSH_ASKPASS="}
	env = gitCredentialEnv(env, self, sock, "", false)
	cmd := exec.Command("git", "credential", "fill")
	cmd.Env = env
	cmd.Stdin = strings.NewReader("url=" + url + "\n\n")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	return out.String(), errb.String(), err
}

func TestGitGetsTheOwnersCredentialFromTheServer(t *testing.T) {
	h := gitcredtest.New(t, func(gitcred.Request) (int, any) {
		return http.StatusOK, gitcred.Credential{Username: "oauth2", Password: "gto_alice"}
	})
	out, errOut, err := gitCredentialFill(t, h, "https://forge.example:3000/alice/app.git")
	if err != nil {
		t.Fatalf("git credential fill: %v\n%s", err, errOut)
	}
	for _, want := range []string{"username=oauth2\n", "password=gto_alice\n", "host=forge.example:3000\n", "path=alice/app.git\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("git credential fill printed %q, want a line %q", out, want)
		}
	}
	if asked := h.Asked(); len(asked) != 1 || asked[0].Request != (gitcred.Request{Protocol: "https", Host: "forge.example:3000", Path: "alice/app.git"}) || asked[0].Authorization != "Bearer hwa_test-token" {
		t.Fatalf("the server was asked %+v", asked)
	}
}

// A refusal the user must act on (not linked) stops git at once with the server's words; a host no
// forge serves lets git go on to its own ways (here: none, so git fails as it would anyway).
func TestGitIsToldWhyThereIsNoCredential(t *testing.T) {
	h := gitcredtest.New(t, func(r gitcred.Request) (int, any) {
		if r.Host == "other.example" {
			return http.StatusNotFound, map[string]string{"code": "not_found", "message": "no forge configured in Hangar serves other.example"}
		}
		return http.StatusConflict, map[string]string{"code": "conflict", "message": "you have not linked your account on forge: run `hangar external-auth link forge`"}
	})
	_, errOut, err := gitCredentialFill(t, h, "https://forge.example/alice/app.git")
	if err == nil {
		t.Fatal("git credential fill succeeded without a credential")
	}
	if !strings.Contains(errOut, "hangar external-auth link forge") || !strings.Contains(errOut, "told us to quit") {
		t.Errorf("git said %q; want the server's reason and git stopping at once", errOut)
	}
	_, errOut, err = gitCredentialFill(t, h, "https://other.example/x.git")
	if err == nil {
		t.Fatal("git credential fill succeeded without a credential")
	}
	if !strings.Contains(errOut, "no forge configured in Hangar serves other.example") || strings.Contains(errOut, "told us to quit") || !strings.Contains(errOut, "terminal prompts disabled") {
		t.Errorf("git said %q; want the server's reason, then git trying its own way (a prompt)", errOut)
	}
}

// The workspace's own git configuration in GIT_CONFIG_* is kept; Hangar's helper comes after it.
func TestGitCredentialEnvKeepsTheUsersConfig(t *testing.T) {
	env := gitCredentialEnv([]string{"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=user.name", "GIT_CONFIG_VALUE_0=Alice"}, "/hangar/bin/hangar", "/s/git-credential.sock", "", true)
	got := strings.Join(env, "\n")
	for _, want := range []string{"GIT_CONFIG_KEY_0=user.name", "GIT_CONFIG_KEY_1=credential.helper", "GIT_CONFIG_VALUE_1=!'/hangar/bin/hangar' git-credential", "GIT_CONFIG_KEY_2=credential.useHttpPath", "GIT_CONFIG_COUNT=3", GitCredentialSocketEnv + "=/s/git-credential.sock"} {
		if !strings.Contains(got, want) {
			t.Errorf("environment\n%s\nlacks %q", got, want)
		}
	}
}

// The owner's identity (GIT_AUTHOR_*, from the profile) is also git's user.name and user.email, so
// that `git config user.email` answers with it; an entry the environment already gives wins.
func TestGitCredentialEnvGivesTheIdentityToGitConfig(t *testing.T) {
	env := strings.Join(gitCredentialEnv([]string{"GIT_AUTHOR_NAME=Alice Liddell", "GIT_AUTHOR_EMAIL=alice@example.com"}, "/hangar/bin/hangar", "/s/git-credential.sock", "", false), "\n")
	for _, want := range []string{"GIT_CONFIG_KEY_2=user.name", "GIT_CONFIG_VALUE_2=Alice Liddell", "GIT_CONFIG_KEY_3=user.email", "GIT_CONFIG_VALUE_3=alice@example.com", "GIT_CONFIG_COUNT=4"} {
		if !strings.Contains(env, want) {
			t.Errorf("environment\n%s\nlacks %q", env, want)
		}
	}
	env = strings.Join(gitCredentialEnv([]string{"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=User.Name", "GIT_CONFIG_VALUE_0=Own", "GIT_AUTHOR_NAME=Alice"}, "/hangar/bin/hangar", "/s/git-credential.sock", "", false), "\n")
	if strings.Contains(env, "GIT_CONFIG_VALUE_3=Alice") || !strings.Contains(env, "GIT_CONFIG_COUNT=3") {
		t.Errorf("with the container's own user.name, environment\n%s\nwants it kept and no second one", env)
	}
	cmd := exec.Command("git", "config", "user.email")
	cmd.Env = gitCredentialEnv([]string{"HOME=" + t.TempDir(), "GIT_CONFIG_NOSYSTEM=1", "GIT_AUTHOR_EMAIL=alice@example.com"}, "/hangar/bin/hangar", "/s/git-credential.sock", "", false)
	if out, err := cmd.Output(); err != nil || string(out) != "alice@example.com\n" {
		t.Errorf("git config user.email in that environment: %q, %v", out, err)
	}
}

// Without the socket (a helper that does not connect out), git is told why and goes on.
func TestGitCredentialWithoutTheSocket(t *testing.T) {
	var out, errOut bytes.Buffer
	GitCredentialMain(context.Background(), "get", filepath.Join(t.TempDir(), "none.sock"), strings.NewReader("protocol=https\nhost=h\n\n"), &out, &errOut)
	if out.Len() != 0 || !strings.Contains(errOut.String(), "the workspace helper does not answer") {
		t.Fatalf("stdout %q, stderr %q", out.String(), errOut.String())
	}
	out.Reset()
	errOut.Reset()
	GitCredentialMain(context.Background(), "store", "", strings.NewReader("protocol=https\nhost=h\nusername=u\npassword=p\n\n"), &out, &errOut)
	if out.Len() != 0 || errOut.Len() != 0 {
		t.Fatalf("store: stdout %q, stderr %q; want nothing (nothing is kept)", out.String(), errOut.String())
	}
}
