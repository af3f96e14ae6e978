package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/server"
	"github.com/hangar-dev/hangar/internal/servertest"
)

// sseEvent is one Server-Sent Event (or a comment, with Event ":").
type sseEvent struct {
	Event string
	Data  server.WorkspaceEvents
}

// openEvents opens GET /api/v1/workspaces/events with token (or the cookie) and returns its events
// as they come.
func openEvents(t *testing.T, env *servertest.Env, token string, cookie *http.Cookie) <-chan sseEvent {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", env.URL+"/api/v1/workspaces/events", nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if cookie != nil {
		req.AddCookie(cookie)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("events: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	out := make(chan sseEvent, 100)
	go func() {
		defer resp.Body.Close()
		defer close(out)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, ":"):
				out <- sseEvent{Event: ":"}
			case strings.HasPrefix(line, "event: "):
				ev.Event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &ev.Data); err != nil {
					t.Errorf("event data %q: %v", line, err)
				}
			case line == "" && ev.Event != "":
				out <- ev
				ev = sseEvent{}
			}
		}
	}()
	return out
}

// next returns the next event (failing after 10 s: a deadline for a failure, not a pause).
func next(t *testing.T, ch <-chan sseEvent) sseEvent {
	t.Helper()
	select {
	case ev, ok := <-ch:
		if !ok {
			t.Fatal("the stream ended")
		}
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no event within 10 s")
	}
	return sseEvent{}
}

// until reads events until ok says the one awaited came; every event read must pass each (the
// stream may repeat a workspace: a change committed as the stream read is sent again next time).
func until(t *testing.T, ch <-chan sseEvent, what string, each func(sseEvent) bool, ok func(sseEvent) bool) sseEvent {
	t.Helper()
	for {
		ev := next(t, ch)
		t.Logf("%s: got %s %v deleted %v", what, ev.Event, states(ev.Data.Workspaces), ev.Data.Deleted)
		if each != nil && !each(ev) {
			t.Fatalf("waiting for %s: unexpected event %+v", what, ev)
		}
		if ok(ev) {
			return ev
		}
	}
}

func states(ws []sdk.Workspace) []string {
	var out []string
	for _, w := range ws {
		out = append(out, w.Owner+"/"+w.Name+"="+w.ActualState)
	}
	slices.Sort(out)
	return out
}

// TestWorkspaceEvents: the live list's stream, on both stores. A user's stream starts with a
// snapshot of their workspaces, then shows their creation, a reconcile's change (Running, then a
// failure with its reason) and a deletion as they commit, and never another user's workspace;
// the admin's stream shows everyone's; an idle stream sends heartbeats.
func TestWorkspaceEvents(t *testing.T) {
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			beats := make(chan time.Time)
			env := servertest.NewWith(t, engine, func(o *server.Options) {
				o.HeartbeatAfter = func(time.Duration) <-chan time.Time { return beats }
			})
			agent := createAgent(t, env, "k1", nil)
			alice := createUser(t, env, "alice")
			bob := createUser(t, env, "bob")
			mustCall(t, env, alice, "POST", "/api/v1/workspaces", sdk.CreateWorkspaceRequest{Name: "before", Agent: "k1", Devfile: proxyDevfile}, http.StatusCreated, nil)

			mine := openEvents(t, env, alice, nil)
			all := openEvents(t, env, env.AdminToken, nil)
			if ev := next(t, mine); ev.Event != "snapshot" || !slices.Equal(states(ev.Data.Workspaces), []string{"alice/before=CreationRequested"}) {
				t.Fatalf("alice's first event: %+v", ev)
			}
			if ev := next(t, all); ev.Event != "snapshot" || len(ev.Data.Workspaces) != 1 {
				t.Fatalf("the admin's first event: %+v", ev)
			}

			// Every event of alice's stream is about her workspaces only.
			hers := func(ev sseEvent) bool {
				for _, w := range ev.Data.Workspaces {
					if w.Owner != "alice" {
						return false
					}
				}
				return ev.Event == "change" || ev.Event == ":"
			}
			has := func(want string) func(sseEvent) bool {
				return func(ev sseEvent) bool { return slices.Contains(states(ev.Data.Workspaces), want) }
			}
			// Bob's creation reaches the admin, not alice (her next event is her own creation).
			mustCall(t, env, bob, "POST", "/api/v1/workspaces", sdk.CreateWorkspaceRequest{Name: "bobs", Agent: "k1", Devfile: proxyDevfile}, http.StatusCreated, nil)
			until(t, all, "bob's creation, on the admin's stream", nil, has("bob/bobs=CreationRequested"))
			mustCall(t, env, alice, "POST", "/api/v1/workspaces", sdk.CreateWorkspaceRequest{Name: "dev", Agent: "k1", Devfile: proxyDevfile}, http.StatusCreated, nil)
			until(t, mine, "alice's creation", hers, has("alice/dev=CreationRequested"))

			// The agent reports dev Running: a reconcile's change.
			info := infoOf(t, env, "dev")
			info.LatestK8sDeploymentInfo = deploymentIn("Running", 1)
			reconcileCall(t, env, agent, protocol.ReconcileRequest{UpdateType: protocol.UpdatePartial, WorkspaceAgentInfos: []protocol.WorkspaceAgentInfo{info}})
			until(t, mine, "Running", hers, has("alice/dev=Running"))
			// A failure, with its reason.
			info.LatestK8sDeploymentInfo = deploymentIn("Starting", 2)
			info.PodFailure = &protocol.PodFailure{Reason: "ImagePullBackOff", Message: "image alpine:nope not found"}
			reconcileCall(t, env, agent, protocol.ReconcileRequest{UpdateType: protocol.UpdatePartial, WorkspaceAgentInfos: []protocol.WorkspaceAgentInfo{info}})
			ev := until(t, mine, "Failed", hers, has("alice/dev=Failed"))
			if e := ev.Data.Workspaces[0].Error; e == nil || !strings.Contains(e.Message, "not found") {
				t.Fatalf("the failure's reason: %+v", e)
			}
			id := ev.Data.Workspaces[0].ID

			// An idle stream's heartbeat.
			// (Both streams wait on the same timer: beat until alice's has had one.)
			beating := make(chan struct{})
			go func() {
				for {
					select {
					case beats <- time.Now():
					case <-beating:
						return
					}
				}
			}()
			until(t, mine, "a heartbeat", hers, func(ev sseEvent) bool { return ev.Event == ":" })
			close(beating)

			// Deleted: desired Terminated (a change), then the agent reports it gone.
			mustCall(t, env, alice, "PATCH", "/api/v1/workspaces/dev", sdk.UpdateWorkspaceRequest{DesiredState: "Terminated"}, http.StatusOK, nil)
			until(t, mine, "desired Terminated", hers, func(ev sseEvent) bool {
				return len(ev.Data.Workspaces) == 1 && ev.Data.Workspaces[0].DesiredState == "Terminated"
			})
			info = infoOf(t, env, "dev")
			info.TerminationProgress = "Terminated"
			reconcileCall(t, env, agent, protocol.ReconcileRequest{UpdateType: protocol.UpdatePartial, WorkspaceAgentInfos: []protocol.WorkspaceAgentInfo{info}})
			until(t, mine, "the deletion", hers, func(ev sseEvent) bool { return slices.Contains(ev.Data.Deleted, id) })
		})
	}
}

// TestCookieAuth: a browser signed in by POST /signin calls the API with its session cookie; an
// unsafe request also needs the CSRF header and a same-origin Sec-Fetch-Site; the cookie's session
// ended, the API answers 401; a page of the UI without a session goes to the sign-in and back.
func TestCookieAuth(t *testing.T) {
	env := servertest.New(t)
	createAgent(t, env, "k1", nil)
	alice := createUser(t, env, "alice")
	mustCall(t, env, alice, "POST", "/api/v1/workspaces", sdk.CreateWorkspaceRequest{Name: "dev", Agent: "k1", Devfile: proxyDevfile}, http.StatusCreated, nil)
	b := &browser{t: t, env: env}
	cookie := b.signIn(alice)

	send := func(method, path string, body string, hdr map[string]string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, env.URL+path, strings.NewReader(body))
		req.AddCookie(cookie)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var e sdk.Error
		_ = json.NewDecoder(resp.Body).Decode(&e)
		return resp.StatusCode, e.Message
	}
	if code, msg := send("GET", "/api/v1/users/me", "", nil); code != 200 {
		t.Fatalf("GET me with the cookie: %d %s", code, msg)
	}
	stop := `{"desired_state":"Stopped"}`
	if code, msg := send("PATCH", "/api/v1/workspaces/dev", stop, map[string]string{"Sec-Fetch-Site": "same-origin"}); code != 403 || !strings.Contains(msg, "X-Hangar-CSRF") {
		t.Fatalf("PATCH without the CSRF header: %d %q", code, msg)
	}
	if code, msg := send("PATCH", "/api/v1/workspaces/dev", stop, map[string]string{"Sec-Fetch-Site": "cross-site", "X-Hangar-CSRF": "1"}); code != 403 || !strings.Contains(msg, "cross-origin") {
		t.Fatalf("PATCH from another site: %d %q", code, msg)
	}
	if code, msg := send("PATCH", "/api/v1/workspaces/dev", stop, map[string]string{"Sec-Fetch-Site": "same-origin", "X-Hangar-CSRF": "1"}); code != 200 {
		t.Fatalf("PATCH from the UI: %d %q", code, msg)
	}
	if w := stored(t, env, "dev"); w.DesiredState != "Stopped" {
		t.Fatalf("desired state %s after the UI's stop", w.DesiredState)
	}

	// The UI's page: with the session, the page; without, the sign-in with the way back.
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, _ := http.NewRequest("GET", env.URL+"/ui/w/alice/dev", nil)
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusFound || loc != "/signin?return_to=%2Fui%2Fw%2Falice%2Fdev" {
		t.Fatalf("the page without a session: %d %q", resp.StatusCode, loc)
	}
	req, _ = http.NewRequest("GET", env.URL+"/ui/w/alice/dev", nil)
	req.AddCookie(cookie)
	resp, err = noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(resp.Header.Get("Content-Security-Policy"), "script-src 'self'") {
		t.Fatalf("the page with a session: %d, CSP %q", resp.StatusCode, resp.Header.Get("Content-Security-Policy"))
	}

	// Signed out: the cookie no longer works.
	b.do("POST", "/signout", nil)
	if code, msg := send("GET", "/api/v1/users/me", "", nil); code != 401 || !strings.Contains(msg, "sign in again") {
		t.Fatalf("GET me after sign-out: %d %q", code, msg)
	}
}

// TestWorkspaceEventsEndWithTheCredential: a stream opened with a token that is then revoked ends
// at its next heartbeat, instead of telling whoever holds it about the workspaces for as long as
// the connection stays open; a stream whose token stays valid goes on.
func TestWorkspaceEventsEndWithTheCredential(t *testing.T) {
	beats := make(chan time.Time)
	env := servertest.NewWith(t, "sqlite", func(o *server.Options) {
		o.HeartbeatAfter = func(time.Duration) <-chan time.Time { return beats }
	})
	alice := createUser(t, env, "alice")
	var tok sdk.Token
	mustCall(t, env, alice, "POST", "/api/v1/tokens", sdk.CreateTokenRequest{Name: "laptop"}, http.StatusCreated, &tok)
	revoked := openEvents(t, env, tok.Token, nil)
	kept := openEvents(t, env, alice, nil)
	for _, ch := range []<-chan sseEvent{revoked, kept} {
		if ev := next(t, ch); ev.Event != "snapshot" {
			t.Fatalf("first event: %+v", ev)
		}
	}
	mustCall(t, env, alice, "DELETE", "/api/v1/tokens/laptop", nil, http.StatusOK, nil)
	// Beat until the revoked token's stream has ended, then once more for the other: it still
	// answers with a heartbeat.
	deadline := time.After(10 * time.Second)
	for ended := false; !ended; {
		select {
		case beats <- time.Now():
		case ev, ok := <-revoked:
			if !ok {
				ended = true
				break
			}
			if ev.Event != ":" {
				t.Fatalf("the revoked token's stream sent %+v", ev)
			}
		case <-deadline:
			t.Fatal("the stream of a revoked token did not end")
		}
	}
	go func() { beats <- time.Now() }()
	if ev := next(t, kept); ev.Event != ":" {
		t.Fatalf("the valid token's stream: %+v, want a heartbeat", ev)
	}
}
