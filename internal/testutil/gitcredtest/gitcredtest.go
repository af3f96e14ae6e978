// Package gitcredtest stands for the Hangar server's git-credentials endpoint
// (protocol.GitCredentialsPath) in tests of what asks it: the workspace helper's git credential
// path, its dotfiles clone, project-clone; and, with SetGitSSH, for its git SSH endpoints
// (protocol.GitSSHKeyPath and GitSSHSignPath), signing with a key of the test's. It also takes the
// helper's dotfiles reports (protocol.DotfilesStatusPath).
package gitcredtest

import (
	"crypto/rand"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/hangar-dev/hangar/internal/gitcred"
	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/sdk"
)

// Asked is one question the server got: git's request and the Authorization header it came with.
type Asked struct {
	Authorization string
	Request       gitcred.Request
}

// Server answers each question with answer (a status and a JSON body), on loopback until the test
// ends.
type Server struct {
	URL    string
	mu     sync.Mutex
	asked  []Asked
	answer func(gitcred.Request) (int, any)
	// reports are the dotfiles statuses reported, with their Authorization.
	reports []Report

	signer     ssh.Signer // nil: the git SSH endpoints answer 404
	knownHosts string
	refuseSSH  string // set: the git SSH endpoints answer 403 with it
	sshAsked   []string
}

// New starts a Server.
func New(t testing.TB, answer func(gitcred.Request) (int, any)) *Server {
	t.Helper()
	s := &Server{answer: answer}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	s.URL = srv.URL
	return s
}

// SetGitSSH makes the server answer the git SSH endpoints as the Hangar server does: signer is the
// owner's key, knownHosts the forges' host keys; refuse, when not empty, answers every git SSH
// request with a 403 saying it (a suspended owner).
func (s *Server) SetGitSSH(signer ssh.Signer, knownHosts, refuse string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.signer, s.knownHosts, s.refuseSSH = signer, knownHosts, refuse
}

// SSHAsked lists the git SSH requests so far, as "METHOD path Authorization".
func (s *Server) SSHAsked() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.sshAsked...)
}

func (s *Server) serveGitSSH(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.sshAsked = append(s.sshAsked, r.Method+" "+r.URL.Path+" "+r.Header.Get("Authorization"))
	signer, known, refuse := s.signer, s.knownHosts, s.refuseSSH
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch {
	case signer == nil:
		w.WriteHeader(http.StatusNotFound)
		_ = json.NewEncoder(w).Encode(sdk.Error{Code: "not_found", Message: "git SSH keys are not configured"})
	case refuse != "":
		w.WriteHeader(http.StatusForbidden)
		_ = json.NewEncoder(w).Encode(sdk.Error{Code: "forbidden", Message: refuse})
	case r.Method == http.MethodGet && r.URL.Path == protocol.GitSSHKeyPath:
		_ = json.NewEncoder(w).Encode(sdk.WorkspaceGitSSH{GitSSHKey: sdk.GitSSHKey{
			PublicKey: strings.TrimSpace(string(ssh.MarshalAuthorizedKey(signer.PublicKey()))) + " hangar:alice"}, KnownHosts: known})
	case r.Method == http.MethodPost && r.URL.Path == protocol.GitSSHSignPath:
		var req sdk.GitSSHSignRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || string(req.PublicKey) != string(signer.PublicKey().Marshal()) {
			w.WriteHeader(http.StatusConflict)
			_ = json.NewEncoder(w).Encode(sdk.Error{Code: "conflict", Message: "not the user's current git SSH key"})
			return
		}
		sig, err := signer.Sign(rand.Reader, req.Data)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		_ = json.NewEncoder(w).Encode(sdk.GitSSHSignature{Format: sig.Format, Blob: sig.Blob})
	default:
		http.NotFound(w, r)
	}
}

// Report is one dotfiles status a helper reported, with the Authorization header it came with.
type Report struct {
	Authorization string
	Status        protocol.DotfilesStatus
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == protocol.GitSSHKeyPath || r.URL.Path == protocol.GitSSHSignPath {
		s.serveGitSSH(w, r)
		return
	}
	if r.Method == http.MethodPut && r.URL.Path == protocol.DotfilesStatusPath {
		var st protocol.DotfilesStatus
		if json.NewDecoder(r.Body).Decode(&st) != nil {
			http.Error(w, "bad report", http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		s.reports = append(s.reports, Report{Authorization: r.Header.Get("Authorization"), Status: st})
		s.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
		return
	}
	var req gitcred.Request
	if r.Method != http.MethodPost || r.URL.Path != protocol.GitCredentialsPath || json.NewDecoder(r.Body).Decode(&req) != nil {
		http.NotFound(w, r)
		return
	}
	s.mu.Lock()
	s.asked = append(s.asked, Asked{Authorization: r.Header.Get("Authorization"), Request: req})
	s.mu.Unlock()
	status, body := s.answer(req)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

// Asked returns the questions so far, oldest first.
func (s *Server) Asked() []Asked {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Asked(nil), s.asked...)
}

// Reports returns the dotfiles statuses reported so far, oldest first.
func (s *Server) Reports() []Report {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Report(nil), s.reports...)
}
