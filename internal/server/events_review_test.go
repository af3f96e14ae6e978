package server_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/server"
	"github.com/hangar-dev/hangar/internal/servertest"
	"github.com/hangar-dev/hangar/internal/store"
)

// beatTimers is a HeartbeatAfter that hands out a new timer channel at each call and keeps them,
// so that a test fires the one a stream armed at a given moment.
type beatTimers struct {
	mu  sync.Mutex
	chs []chan time.Time
}

func (b *beatTimers) after(time.Duration) <-chan time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	ch := make(chan time.Time, 1)
	b.chs = append(b.chs, ch)
	return ch
}

func (b *beatTimers) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.chs)
}

func (b *beatTimers) fire(i int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.chs[i] <- time.Now()
}

// ended waits (10 s at most) for the stream to end, failing if it sends a workspace meanwhile.
func ended(t *testing.T, ch <-chan sseEvent, what string) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				return
			}
			if len(ev.Data.Workspaces) > 0 {
				t.Fatalf("%s: the stream sent %v", what, states(ev.Data.Workspaces))
			}
		case <-deadline:
			t.Fatalf("%s: the stream did not end", what)
		}
	}
}

// TestWorkspaceEventsEndAtOnceOnRevocation: a revocation (a token revoked, a user suspended) ends
// the streams it concerns at once, without waiting for a heartbeat (none fires in this test).
func TestWorkspaceEventsEndAtOnceOnRevocation(t *testing.T) {
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			never := make(chan time.Time)
			env := servertest.NewWith(t, engine, func(o *server.Options) {
				o.HeartbeatAfter = func(time.Duration) <-chan time.Time { return never }
			})
			createAgent(t, env, "k1", nil)
			alice := createUser(t, env, "alice")
			bob := createUser(t, env, "bob")
			var tok sdk.Token
			mustCall(t, env, alice, "POST", "/api/v1/tokens", sdk.CreateTokenRequest{Name: "laptop"}, http.StatusCreated, &tok)
			revoked := openEvents(t, env, tok.Token, nil)
			kept := openEvents(t, env, alice, nil)
			bobs := openEvents(t, env, bob, nil)
			for _, ch := range []<-chan sseEvent{revoked, kept, bobs} {
				if ev := next(t, ch); ev.Event != "snapshot" {
					t.Fatalf("first event: %+v", ev)
				}
			}
			mustCall(t, env, alice, "DELETE", "/api/v1/tokens/laptop", nil, http.StatusOK, nil)
			ended(t, revoked, "the revoked token's stream")

			f := true
			mustCall(t, env, env.AdminToken, "PATCH", "/api/v1/users/bob", sdk.UpdateUserRequest{Suspended: &f}, http.StatusOK, nil)
			ended(t, bobs, "the suspended user's stream")

			// Alice's other token still works: her stream goes on and shows her next workspace.
			mustCall(t, env, alice, "POST", "/api/v1/workspaces", sdk.CreateWorkspaceRequest{Name: "dev", Agent: "k1", Devfile: proxyDevfile}, http.StatusCreated, nil)
			until(t, kept, "alice's creation", nil, func(ev sseEvent) bool { return ev.Event == "change" && len(ev.Data.Workspaces) == 1 })
		})
	}
}

// TestWorkspaceEventsCheckTheCredentialWhileBusy: the credential is checked at the heartbeat due
// even when changes keep coming (each change must not put the heartbeat off): a token that expired
// (no revocation: only the heartbeat notices) ends its stream at the heartbeat armed before the
// change.
func TestWorkspaceEventsCheckTheCredentialWhileBusy(t *testing.T) {
	beats := &beatTimers{}
	env := servertest.NewWith(t, "sqlite", func(o *server.Options) { o.HeartbeatAfter = beats.after })
	createAgent(t, env, "k1", nil)
	alice := createUser(t, env, "alice")
	var tok sdk.Token
	mustCall(t, env, alice, "POST", "/api/v1/tokens", sdk.CreateTokenRequest{Name: "short", LifetimeSeconds: 60}, http.StatusCreated, &tok)
	ch := openEvents(t, env, tok.Token, nil)
	if ev := next(t, ch); ev.Event != "snapshot" {
		t.Fatalf("first event: %+v", ev)
	}
	// The stream armed its heartbeat before it sent the snapshot.
	if n := beats.count(); n != 1 {
		t.Fatalf("%d heartbeat timers armed at the snapshot, want 1", n)
	}
	const armed = 0
	// A change reaches the stream while the token is valid.
	mustCall(t, env, alice, "POST", "/api/v1/workspaces", sdk.CreateWorkspaceRequest{Name: "dev", Agent: "k1", Devfile: proxyDevfile}, http.StatusCreated, nil)
	if ev := next(t, ch); ev.Event != "change" {
		t.Fatalf("the creation: %+v", ev)
	}
	env.Clock.Advance(2 * time.Minute) // the token expired
	beats.fire(armed)
	ended(t, ch, "the expired token's stream")
}

// TestWorkspaceEventsEndWhenNoLongerAdmin: an admin's stream shows every workspace; once its user
// is no longer admin (an OIDC sign-in re-evaluates the flag), the stream ends at its next
// heartbeat instead of going on showing everyone's workspaces.
func TestWorkspaceEventsEndWhenNoLongerAdmin(t *testing.T) {
	beats := make(chan time.Time)
	env := servertest.NewWith(t, "sqlite", func(o *server.Options) {
		o.HeartbeatAfter = func(time.Duration) <-chan time.Time { return beats }
	})
	ctx := context.Background()
	in := store.OIDCSignIn{Issuer: "https://idp.example", Subject: "carol-1", Email: "carol@example.com", Admin: true, Username: "carol",
		UserID: uuid.NewString(), TokenHash: server.HashToken(server.NewToken("hgu_")), At: env.Clock.Now()}
	carol, _, err := env.Store.SignInOIDC(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	secret := server.NewToken("hgu_")
	if err := env.Store.CreateToken(ctx, store.APIToken{ID: uuid.NewString(), UserID: carol.ID, Name: "cli", Hash: server.HashToken(secret), CreatedAt: env.Clock.Now()}); err != nil {
		t.Fatal(err)
	}
	ch := openEvents(t, env, secret, nil)
	if ev := next(t, ch); ev.Event != "snapshot" {
		t.Fatalf("first event: %+v", ev)
	}
	go func() { beats <- time.Now() }()
	if ev := next(t, ch); ev.Event != ":" {
		t.Fatalf("while admin: %+v, want a heartbeat", ev)
	}
	in.Admin, in.At = false, env.Clock.Now()
	if _, _, err := env.Store.SignInOIDC(ctx, in); err != nil {
		t.Fatal(err)
	}
	go func() {
		select {
		case beats <- time.Now():
		case <-time.After(10 * time.Second):
		}
	}()
	ended(t, ch, "the demoted admin's stream")
}
