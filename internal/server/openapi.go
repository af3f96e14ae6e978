package server

import (
	_ "embed"
	"net/http"
)

// OpenAPI is the OpenAPI 3 document of the HTTP API (user API and agent reconcile endpoint). A test
// loads and validates it and checks that every route the server serves is in it.
//
//go:embed openapi.yaml
var OpenAPI []byte

func (s *Server) openapi(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/yaml")
	_, _ = w.Write(OpenAPI)
}
