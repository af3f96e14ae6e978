package server_test

import (
	"net/http"
	"reflect"
	"testing"

	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/servertest"
)

// TestWorkspaceEndpoints: the answer about a Kubernetes workspace lists every endpoint its devfile
// declares, of every container, with the URL the access proxy serves each public one at (the
// agent's zone and scheme); the list answer leaves them out.
func TestWorkspaceEndpoints(t *testing.T) {
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			env := servertest.NewWith(t, engine)
			createAgent(t, env, "c1", map[string]any{"dns_zone": "ws.example.com", "proxy_url_scheme": "http"})
			devfile := proxyDevfile + `- name: db
  container:
    image: postgres
    endpoints:
    - {name: pg, targetPort: 5432, exposure: internal}
    - {name: admin, targetPort: 8081, path: /admin/}
`
			mustCall(t, env, env.AdminToken, "POST", "/api/v1/workspaces", map[string]any{"name": "eps", "agent": "c1", "devfile": devfile}, http.StatusCreated, nil)
			got := getWorkspace(t, env, env.AdminToken, "eps").Endpoints
			want := []sdk.WorkspaceEndpoint{
				{Name: "web", Container: "main", Port: 8080, Exposure: "public", URL: "http://8080-eps--admin.ws.example.com/"},
				{Name: "api", Container: "main", Port: 9000, Exposure: "internal"},
				{Name: "debug", Container: "main", Port: 5005, Exposure: "none"},
				{Name: "pg", Container: "db", Port: 5432, Exposure: "internal"},
				{Name: "admin", Container: "db", Port: 8081, Exposure: "public", Path: "/admin/", URL: "http://8081-eps--admin.ws.example.com/admin/"},
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("endpoints:\n got %+v\nwant %+v", got, want)
			}
			var list []sdk.Workspace
			mustCall(t, env, env.AdminToken, "GET", "/api/v1/workspaces", nil, http.StatusOK, &list)
			if len(list) != 1 || list[0].Endpoints != nil {
				t.Fatalf("the list: %+v", list)
			}
		})
	}
}
