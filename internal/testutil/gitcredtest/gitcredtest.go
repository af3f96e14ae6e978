// Package gitcredtest stands for the Hangar server's git-credentials endpoint
// (protocol.GitCredentialsPath) in tests of what asks it: the workspace helper's git credential
// path, its dotfiles clone, project-clone.
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
	URL    string
	mu     sync.Mutex
	asked  []Asked
	answer func(gitcred.Request) (int, any)
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

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
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
