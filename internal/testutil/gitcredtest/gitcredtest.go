// Package gitcredtest stands for the Hangar server's git-credentials endpoint
// (protocol.GitCredentialsPath) in tests of what asks it: the workspace helper's git credential
// path, its dotfiles clone, project-clone. It also takes the helper's dotfiles reports
// (protocol.DotfilesStatusPath).
package gitcredtest

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/hangar-dev/hangar/internal/gitcred"
	"github.com/hangar-dev/hangar/internal/protocol"
)

// Asked is one question the server got: git's request and the Authorization header it came with.
type Asked struct {
	Authorization string
	Request       gitcred.Request
}

// Server answers each question with answer (a status and a JSON body), on loopback until the test
// ends.
type Server struct {
	URL   string
	mu    sync.Mutex
	asked []Asked
	// reports are the dotfiles statuses reported, with their Authorization.
	reports []Report
	answer  func(gitcred.Request) (int, any)
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

// Report is one dotfiles status a helper reported, with the Authorization header it came with.
type Report struct {
	Authorization string
	Status        protocol.DotfilesStatus
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
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
