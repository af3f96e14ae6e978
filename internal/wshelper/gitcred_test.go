//go:build unix

package wshelper

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func TestParseCredentialRequest(t *testing.T) {
	req, err := ParseCredentialRequest(strings.NewReader("capability[]=authtype\nprotocol=https\nhost=git.example.com:3000\npath=alice/app.git\nwwwauth[]=Basic realm=\"x\"\n\nignored=after the blank line\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := CredentialRequest{Protocol: "https", Host: "git.example.com:3000", Path: "alice/app.git"}
	if req != want {
		t.Fatalf("got %+v, want %+v", req, want)
	}
	req, err = ParseCredentialRequest(strings.NewReader("url=https://bob@git.example.com/team/app.git\n"))
	if err != nil {
		t.Fatal(err)
	}
	if want := (CredentialRequest{Protocol: "https", Host: "git.example.com", Path: "team/app.git", Username: "bob"}); req != want {
		t.Fatalf("from url=: got %+v, want %+v", req, want)
	}
	for in, wantErr := range map[string]string{
		"":                                  "no protocol",
		"protocol=https\n":                  "no host",
		"protocol=https\nhost\n":            `line "host" is not key=value`,
		"protocol=https\nhost=a\x00b\n":     "a NUL byte",
		"url=git.example.com/x\n":           "is not an absolute URL",
		strings.Repeat("path=aaaa\n", 8000): "over 65536 bytes",
		"protocol=" + strings.Repeat("a", 70000) + "\n": "over 65536 bytes",
	} {
		_, err := ParseCredentialRequest(strings.NewReader(in))
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("ParseCredentialRequest(%.30q): %v, want an error with %q", in, err, wantErr)
		}
	}
}

// FuzzParseCredentialRequest: whatever arrives on the socket, the parse ends with a bounded
// request or an error, and a request it accepts prints back as lines that parse to the same
// request (no value can forge another attribute).
func FuzzParseCredentialRequest(f *testing.F) {
	for _, s := range []string{"protocol=https\nhost=h\npath=a/b.git\n\n", "url=https://u@h:1/p\n", "protocol=https\r\nhost=h\r\n", "=x\n", "host=h\nprotocol=ssh\nusername=git\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		req, err := ParseCredentialRequest(strings.NewReader(in))
		if err != nil {
			return
		}
		var b bytes.Buffer
		if err := req.Format(&b); err != nil {
			t.Fatal(err)
		}
		again, err := ParseCredentialRequest(&b)
		if err != nil || again != req {
			t.Fatalf("%q: printed as %q, read back as %+v, %v", in, b.String(), again, err)
		}
	})
}

// hangarServer answers protocol.GitCredentialsPath as the Hangar server would, recording what it
// was asked and with which token.
type hangarServer struct {
	mu     sync.Mutex
	asked  []CredentialRequest
	tokens []string
	answer func(CredentialRequest) (int, any)
}

func (h *hangarServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/api/v1/workspace-agent/git-credentials" {
		http.NotFound(w, r)
		return
	}
	var req CredentialRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	h.mu.Lock()
	h.asked = append(h.asked, req)
	h.tokens = append(h.tokens, r.Header.Get("Authorization"))
	h.mu.Unlock()
	status, body := h.answer(req)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

// gitCredentialFill runs the real `git credential fill` for url with the environment the helper
// gives a workspace's processes, git's helper being this test binary (TestMain runs
// GitCredentialMain for it): what git would get for a clone or a push.
func gitCredentialFill(t *testing.T, h *hangarServer, url string) (stdout, stderr string, err error) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("git is needed (scripts/install-deps): %v", err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
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
		serveGitCredentials(ctx, ln, AskServer(srv.Client(), srv.URL, "hwa_test-token"), slog.New(slog.DiscardHandler))
	}()
	t.Cleanup(func() { cancel(); ln.Close(); <-done })

	home := t.TempDir()
	env := []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0", "GIT_ASKPASS=", "SSH_ASKPASS="}
	env = gitCredentialEnv(env, self, sock)
	cmd := exec.Command("git", "credential", "fill")
	cmd.Env = env
	cmd.Stdin = strings.NewReader("url=" + url + "\n\n")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	return out.String(), errb.String(), err
}

func TestGitGetsTheOwnersCredentialFromTheServer(t *testing.T) {
	h := &hangarServer{answer: func(CredentialRequest) (int, any) {
		return http.StatusOK, Credential{Username: "oauth2", Password: "gto_alice"}
	}}
	out, errOut, err := gitCredentialFill(t, h, "https://forge.example:3000/alice/app.git")
	if err != nil {
		t.Fatalf("git credential fill: %v\n%s", err, errOut)
	}
	for _, want := range []string{"username=oauth2\n", "password=gto_alice\n", "host=forge.example:3000\n", "path=alice/app.git\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("git credential fill printed %q, want a line %q", out, want)
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.asked) != 1 || h.asked[0] != (CredentialRequest{Protocol: "https", Host: "forge.example:3000", Path: "alice/app.git"}) || h.tokens[0] != "Bearer hwa_test-token" {
		t.Fatalf("the server was asked %+v with %q", h.asked, h.tokens)
	}
}

// A refusal the user must act on (not linked) stops git at once with the server's words; a host no
// forge serves lets git go on to its own ways (here: none, so git fails as it would anyway).
func TestGitIsToldWhyThereIsNoCredential(t *testing.T) {
	h := &hangarServer{answer: func(r CredentialRequest) (int, any) {
		if r.Host == "other.example" {
			return http.StatusNotFound, map[string]string{"code": "not_found", "message": "no forge configured in Hangar serves other.example"}
		}
		return http.StatusConflict, map[string]string{"code": "conflict", "message": "you have not linked your account on forge: run `hangar external-auth link forge`"}
	}}
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
	env := gitCredentialEnv([]string{"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=user.name", "GIT_CONFIG_VALUE_0=Alice"}, "/hangar/bin/hangar", "/s/git-credential.sock")
	got := strings.Join(env, "\n")
	for _, want := range []string{"GIT_CONFIG_KEY_0=user.name", "GIT_CONFIG_KEY_1=credential.helper", "GIT_CONFIG_VALUE_1=!'/hangar/bin/hangar' git-credential", "GIT_CONFIG_KEY_2=credential.useHttpPath", "GIT_CONFIG_COUNT=3", GitCredentialSocketEnv + "=/s/git-credential.sock"} {
		if !strings.Contains(got, want) {
			t.Errorf("environment\n%s\nlacks %q", got, want)
		}
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
