package server_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/servertest"
)

// FuzzAuditQuery sends arbitrary queries to GET /api/v1/audit: the answer is never a 5xx; a 400
// names the parameter at fault; a 200 is a page within the limit whose entries match the filters.
func FuzzAuditQuery(f *testing.F) {
	for _, q := range []string{"", "limit=2", "actor=alice&action=workspace.create", "target=w&target_kind=workspace", "outcome=failure",
		"since=24h&until=2026-01-01T06:00:00Z", "before_id=3&limit=1", "limit=0", "since=x", "colour=red", "limit=1&limit=2",
		"actor=%01", "target=%25", "target=a_b", "action=A.B", "since=9999999h", "before_id=99999999999999999999", "until=2026-13-01T00:00:00Z"} {
		f.Add(q)
	}
	env := servertest.New(f)
	createUser(f, env, "alice")
	mustCall(f, env, env.AdminToken, "POST", "/api/v1/users", map[string]any{"username": "alice"}, http.StatusConflict, nil)
	f.Fuzz(func(t *testing.T, raw string) {
		if strings.ContainsFunc(raw, func(r rune) bool { return r <= ' ' || r >= 0x7f || r == '#' }) {
			return // a client percent-encodes these; sent raw, the HTTP server refuses the request line
		}
		req, err := http.NewRequest("GET", env.URL+"/api/v1/audit?"+raw, nil)
		if err != nil {
			return // not a URL a client can send
		}
		req.Header.Set("Authorization", "Bearer "+env.AdminToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch resp.StatusCode {
		case http.StatusOK:
			var p sdk.AuditPage
			if err := json.Unmarshal(body, &p); err != nil {
				t.Fatalf("%q: 200 with %s: %v", raw, body, err)
			}
			q := req.URL.Query()
			for _, e := range p.Entries {
				if a := q.Get("actor"); a != "" && e.Actor != a {
					t.Fatalf("%q listed %+v", raw, e)
				}
				if o := q.Get("outcome"); o != "" && e.Outcome != o {
					t.Fatalf("%q listed %+v", raw, e)
				}
			}
		case http.StatusBadRequest:
			var e sdk.Error
			if err := json.Unmarshal(body, &e); err != nil || len(e.Validations) == 0 || strings.TrimSpace(e.Validations[0].Field) == "" && e.Validations[0].Detail == "" {
				t.Fatalf("%q: 400 naming no parameter: %s", raw, body)
			}
		default:
			t.Fatalf("%q: %d %s", raw, resp.StatusCode, body)
		}
	})
}
