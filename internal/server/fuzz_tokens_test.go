package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/server"
	"github.com/hangar-dev/hangar/internal/servertest"
)

// FuzzTokenBody creates tokens from arbitrary bodies. What the server takes is a token with a valid
// name, a lifetime within the maximum, that works and is listed without its secret; what it refuses
// is a 4xx that creates nothing.
func FuzzTokenBody(f *testing.F) {
	f.Add([]byte(`{"name":"ci"}`))
	f.Add([]byte(`{"name":"ci","lifetime_seconds":3600}`))
	f.Add([]byte(`{"name":"ci","lifetime_seconds":-1}`))
	f.Add([]byte(`{"name":"ci","lifetime_seconds":99999999999999}`))
	f.Add([]byte(`{"name":"a b"}`))
	f.Add([]byte(`{"name":"ci","user":"admin"}`))
	f.Add([]byte(`{"name":1}`))
	env := servertest.NewWith(f, "sqlite")
	user := createUser(f, env, "fz")
	name := regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)
	count := func(t *testing.T) int {
		var l []sdk.Token
		mustCall(t, env, user, "GET", "/api/v1/tokens", nil, http.StatusOK, &l)
		return len(l)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		before := count(t)
		status, out := call(t, env, user, "POST", "/api/v1/tokens", body)
		switch {
		case status == http.StatusCreated:
		case status >= 400 && status < 500:
			if n := count(t); n != before {
				t.Fatalf("a refused body (%d %s) changed the tokens from %d to %d", status, out, before, n)
			}
			return
		default:
			t.Fatalf("POST %q answered %d %s", body, status, out)
		}
		var tk sdk.Token
		if err := json.Unmarshal(out, &tk); err != nil {
			t.Fatal(err)
		}
		now := env.Clock.Now()
		if !name.MatchString(tk.Name) || tk.ExpiresAt == nil || !tk.ExpiresAt.After(now) || tk.ExpiresAt.After(now.Add(366*24*time.Hour)) {
			t.Fatalf("created %+v from %q", tk, body)
		}
		mustCall(t, env, tk.Token, "GET", "/api/v1/users/me", nil, http.StatusOK, nil)
		_, list := call(t, env, user, "GET", "/api/v1/tokens", nil)
		if strings.Contains(string(list), tk.Token) {
			t.Fatal("the list holds a secret")
		}
		mustCall(t, env, user, "DELETE", "/api/v1/tokens/"+tk.ID, nil, http.StatusOK, nil)
	})
}

// FuzzUserPatchBody sends arbitrary PATCH bodies for a user. The answer is the user with its
// suspension as asked, or a 4xx that changes nothing.
func FuzzUserPatchBody(f *testing.F) {
	f.Add([]byte(`{"suspended":true}`))
	f.Add([]byte(`{"suspended":false}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"suspended":"yes"}`))
	f.Add([]byte(`{"admin":true}`))
	env := servertest.NewWith(f, "sqlite")
	createUser(f, env, "fz")
	suspended := func(t *testing.T) bool {
		var us []sdk.User
		mustCall(t, env, env.AdminToken, "GET", "/api/v1/users", nil, http.StatusOK, &us)
		for _, u := range us {
			if u.Username == "fz" {
				return u.Suspended
			}
		}
		t.Fatal("fz is gone")
		return false
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		before := suspended(t)
		status, out := call(t, env, env.AdminToken, "PATCH", "/api/v1/users/fz", body)
		switch {
		case status == http.StatusOK:
			var req struct{ Suspended *bool }
			var u sdk.User
			if json.Unmarshal(body, &req) != nil || req.Suspended == nil || json.Unmarshal(out, &u) != nil || u.Suspended != *req.Suspended || suspended(t) != *req.Suspended {
				t.Fatalf("PATCH %q answered %s", body, out)
			}
		case status >= 400 && status < 500:
			if suspended(t) != before {
				t.Fatalf("a refused PATCH %q (%d) changed the suspension", body, status)
			}
		default:
			t.Fatalf("PATCH %q answered %d %s", body, status, out)
		}
	})
}

// FuzzAgentPatchBody sends arbitrary config patches. An accepted one leaves a config that the
// agent's registration would accept too, with the fixed fields unchanged; a refused one is a 4xx
// that changes nothing.
func FuzzAgentPatchBody(f *testing.F) {
	f.Add([]byte(`{"config":{"workspaces_quota":5}}`))
	f.Add([]byte(`{"config":{"workspaces_quota":null}}`))
	f.Add([]byte(`{"config":{"dns_zone":"other.example.com"}}`))
	f.Add([]byte(`{"config":{"proxy_url_scheme":"gopher"}}`))
	f.Add([]byte(`{"config":{"labels":{"a":"b"},"nope":1}}`))
	f.Add([]byte(`{"config":[]}`))
	f.Add([]byte(`{"config":{"network_policy":{"egress":[{"allow":"10.0.0.0/8"}]}}}`))
	env := servertest.NewWith(f, "sqlite")
	createAgent(f, env, "k1", map[string]any{"dns_zone": "ws.example.com"})
	config := func(t *testing.T) string {
		var as []sdk.Agent
		mustCall(t, env, env.AdminToken, "GET", "/api/v1/agents", nil, http.StatusOK, &as)
		for _, a := range as {
			if a.Name == "k1" {
				return string(a.Config)
			}
		}
		t.Fatal("k1 is gone")
		return ""
	}
	checks := 0
	f.Fuzz(func(t *testing.T, body []byte) {
		before := config(t)
		status, out := call(t, env, env.AdminToken, "PATCH", "/api/v1/agents/k1", body)
		switch {
		case status == http.StatusOK:
			after := config(t)
			if !strings.Contains(after, `"dns_zone":"ws.example.com"`) || !strings.Contains(after, `"namespace_mode":"per_workspace"`) {
				t.Fatalf("PATCH %q changed a fixed field: %s", body, after)
			}
			// What was accepted would be accepted at registration.
			checks++
			status, out := call(t, env, env.AdminToken, "POST", "/api/v1/agents", map[string]any{"name": fmt.Sprintf("check-%d", checks), "config": json.RawMessage(after)})
			if status != http.StatusCreated {
				t.Fatalf("the patched config %s is refused at registration: %d %s", after, status, out)
			}
		case status >= 400 && status < 500:
			if config(t) != before {
				t.Fatalf("a refused PATCH %q (%d %s) changed the config", body, status, out)
			}
		default:
			t.Fatalf("PATCH %q answered %d %s", body, status, out)
		}
	})
}

// FuzzRevocationsQuery sends arbitrary queries to the proxies' revocation long-poll (its timers
// fire at once). Every answer is the counter (200, never below 0) or a 400 naming after or
// timeout_seconds.
func FuzzRevocationsQuery(f *testing.F) {
	for _, q := range []string{"", "after=-1", "after=0&timeout_seconds=1", "after=-2", "after=x", "timeout_seconds=61", "timeout_seconds=0", "after=99999999999999999999"} {
		f.Add(q)
	}
	env := servertest.NewWith(f, "sqlite", func(o *server.Options) {
		o.After = func(time.Duration) <-chan time.Time {
			ch := make(chan time.Time, 1)
			ch <- time.Time{}
			return ch
		}
	})
	agent := createAgent(f, env, "k1", nil)
	f.Fuzz(func(t *testing.T, query string) {
		// Only what a client can put in a URL's query.
		if strings.IndexFunc(query, func(r rune) bool { return r <= ' ' || r >= 0x7f || r == '#' }) >= 0 {
			return
		}
		status, out := call(t, env, agent, "GET", protocol.ProxyRevocationsPath+"?"+query, nil)
		switch status {
		case http.StatusOK:
			var r protocol.ProxyRevocationsResponse
			if err := json.Unmarshal(out, &r); err != nil || r.Seq < 0 {
				t.Fatalf("?%s: %s", query, out)
			}
		case http.StatusBadRequest:
			e := apiError(t, out)
			if len(e.Validations) != 1 || (e.Validations[0].Field != "after" && e.Validations[0].Field != "timeout_seconds" && e.Validations[0].Field != "path") {
				t.Fatalf("?%s: %s", query, out)
			}
		default:
			t.Fatalf("?%s answered %d %s", query, status, out)
		}
	})
}
