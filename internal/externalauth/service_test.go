package externalauth

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/clock"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/store/sqlite"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// tokenEndpoint answers a refresh with the next of its answers (status, body), and counts them.
type tokenEndpoint struct {
	mu      sync.Mutex
	answers [][2]string
	calls   int
	sent    []string // the refresh tokens sent
}

func (e *tokenEndpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_ = r.ParseForm()
	e.mu.Lock()
	e.sent = append(e.sent, r.PostForm.Get("refresh_token"))
	a := e.answers[min(e.calls, len(e.answers)-1)]
	e.calls++
	e.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	status := map[string]int{"200": 200, "400": 400, "503": 503}[a[0]]
	w.WriteHeader(status)
	_, _ = w.Write([]byte(a[1]))
}

// newRefreshService is a Service over a real SQLite store, with alice linked to a forge whose
// token endpoint is e, her access token due for a refresh.
func newRefreshService(t *testing.T, e *tokenEndpoint) (*Service, workspace.User, *clock.Fake) {
	s, u, clk, _ := newRefreshServiceStore(t, e)
	return s, u, clk
}

func newRefreshServiceStore(t *testing.T, e *tokenEndpoint) (*Service, workspace.User, *clock.Fake, store.Store) {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "hangar.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	clk := clock.NewFake(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
	u := workspace.User{ID: "00000000-0000-4000-8000-0000000000a1", Username: "alice", TokenHash: []byte("h"), CreatedAt: clk.Now()}
	if err := st.CreateUser(ctx, u); err != nil {
		t.Fatal(err)
	}
	ps, err := Decode([]byte(`{"providers":[{"id":"gl","type":"gitlab","client_id":"c","client_secret_env":"S","base_url":"`+srv.URL+`"}]}`),
		func(string) (string, bool) { return "s", true }, nil)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := ParseKeys([]byte(testKey))
	if err != nil {
		t.Fatal(err)
	}
	s := New(Options{Providers: ps, Keys: keys, Store: st, Clock: clk, CallbackURL: func(string) string { return "http://127.0.0.1/cb" },
		After: func(time.Duration) <-chan time.Time { return time.After(time.Millisecond) }})
	exp := clk.Now().Add(time.Minute)
	l := store.ExternalAuthLink{UserID: u.ID, ProviderID: "gl", LinkedAt: clk.Now(), ExpiresAt: &exp, AccountLogin: "alice-gl"}
	l.KeyID, l.AccessToken = keys.Seal([]byte("old-access"), tokenAAD(u.ID, "gl", "access"))
	_, l.RefreshToken = keys.Seal([]byte("old-refresh"), tokenAAD(u.ID, "gl", "refresh"))
	if _, err := st.PutExternalAuthLink(ctx, l); err != nil {
		t.Fatal(err)
	}
	return s, u, clk, st
}

const newToken = `{"access_token":"new-access","refresh_token":"new-refresh","token_type":"bearer","expires_in":7200}`

// TestTokenRefresh: within the margin the token is refreshed (its expiry on the injected clock);
// a failure that is not a refusal is tried once more; a second failure is reported without
// giving up the link; a refusal marks the link to be linked again, with the forge's words, and
// the dead refresh token is not sent again; a suspended user gets nothing.
func TestTokenRefresh(t *testing.T) {
	ctx := context.Background()
	t.Run("refreshed", func(t *testing.T) {
		e := &tokenEndpoint{answers: [][2]string{{"200", newToken}}}
		s, u, clk := newRefreshService(t, e)
		tok, err := s.Token(ctx, u, "gl")
		if err != nil || tok.AccessToken != "new-access" || tok.Username != "oauth2" || e.calls != 1 || tok.ExpiresAt == nil || !tok.ExpiresAt.Equal(clk.Now().Add(2*time.Hour)) {
			t.Fatalf("Token = %+v, %v after %d calls", tok, err, e.calls)
		}
		if tok, err := s.Token(ctx, u, "gl"); err != nil || tok.AccessToken != "new-access" || e.calls != 1 {
			t.Fatalf("Token again = %+v, %v after %d calls; want the stored one", tok, err, e.calls)
		}
	})
	t.Run("a failure is tried once more", func(t *testing.T) {
		e := &tokenEndpoint{answers: [][2]string{{"503", `{}`}, {"200", newToken}}}
		s, u, _ := newRefreshService(t, e)
		if tok, err := s.Token(ctx, u, "gl"); err != nil || tok.AccessToken != "new-access" || e.calls != 2 {
			t.Fatalf("Token = %+v, %v after %d calls", tok, err, e.calls)
		}
	})
	t.Run("two failures keep the link", func(t *testing.T) {
		e := &tokenEndpoint{answers: [][2]string{{"503", `{}`}}}
		s, u, _ := newRefreshService(t, e)
		if _, err := s.Token(ctx, u, "gl"); !errors.Is(err, ErrForge) || e.calls != 2 {
			t.Fatalf("Token = %v after %d calls, want ErrForge after 2", err, e.calls)
		}
		ls, _ := s.Links(ctx, u)
		if ls[0].Link.RelinkReason != "" || !strings.Contains(ls[0].Link.RefreshError, "503") || ls[0].Link.RefreshClaimedUntil != nil {
			t.Fatalf("link after two failures: %+v", ls[0].Link)
		}
	})
	t.Run("a refusal asks for a new link", func(t *testing.T) {
		e := &tokenEndpoint{answers: [][2]string{{"400", `{"error":"invalid_grant","error_description":"The provided authorization grant is invalid"}`}}}
		s, u, _ := newRefreshService(t, e)
		_, err := s.Token(ctx, u, "gl")
		if !errors.Is(err, ErrRelink) || e.calls != 1 || !strings.Contains(err.Error(), "the forge refused the refresh: invalid_grant: The provided authorization grant is invalid; run `hangar external-auth link gl`") {
			t.Fatalf("Token = %v after %d calls", err, e.calls)
		}
		if _, err := s.Token(ctx, u, "gl"); !errors.Is(err, ErrRelink) || e.calls != 1 {
			t.Fatalf("Token again = %v after %d calls; want ErrRelink without asking the forge", err, e.calls)
		}
	})
	t.Run("a forge that does not rotate, across a key rotation", func(t *testing.T) {
		e := &tokenEndpoint{answers: [][2]string{{"200", `{"access_token":"a2","token_type":"bearer","expires_in":120}`}}}
		s, u, clk, st := newRefreshServiceStore(t, e)
		if tok, err := s.Token(ctx, u, "gl"); err != nil || tok.AccessToken != "a2" {
			t.Fatalf("Token = %+v, %v", tok, err)
		}
		// The admin rotates the key: a new one first, the old one kept.
		keys, err := ParseKeys([]byte("new:" + strings.Repeat("cd", 32) + "\n" + testKey))
		if err != nil {
			t.Fatal(err)
		}
		rotated := New(Options{Providers: s.o.Providers, Keys: keys, Store: st, Clock: clk, CallbackURL: s.o.CallbackURL, After: s.o.After})
		clk.Advance(2 * time.Minute)
		if tok, err := rotated.Token(ctx, u, "gl"); err != nil || tok.AccessToken != "a2" {
			t.Fatalf("Token after the key rotation = %+v, %v", tok, err)
		}
		clk.Advance(2 * time.Minute)
		if tok, err := rotated.Token(ctx, u, "gl"); err != nil || tok.AccessToken != "a2" {
			t.Fatalf("Token after a refresh under the new key = %+v, %v", tok, err)
		}
		if strings.Join(e.sent, ",") != "old-refresh,old-refresh,old-refresh" {
			t.Fatalf("refresh tokens sent: %q, want the one the forge keeps, each time", e.sent)
		}
		if l, _ := st.ExternalAuthLink(ctx, u.ID, "gl"); l.KeyID != "new" {
			t.Fatalf("after refreshes under the new key the link is sealed under %q", l.KeyID)
		}
	})
	t.Run("suspended", func(t *testing.T) {
		e := &tokenEndpoint{answers: [][2]string{{"200", newToken}}}
		s, u, clk := newRefreshService(t, e)
		at := clk.Now()
		u.SuspendedAt = &at
		if _, err := s.Token(ctx, u, "gl"); !errors.Is(err, ErrSuspended) || e.calls != 0 {
			t.Fatalf("Token of a suspended user = %v after %d calls", err, e.calls)
		}
	})
}

// cancelAfterAnswer passes requests on and, once the forge has answered (its body read), cancels
// the caller's context: the caller (git, through the workspace's helper) gave up just as the forge
// rotated the refresh token.
type cancelAfterAnswer struct{ cancel context.CancelFunc }

func (c cancelAfterAnswer) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	c.cancel()
	return resp, nil
}

// TestTokenRefreshOutlivesTheCaller: a refresh, once claimed, is finished and stored even when the
// request that asked for it ends meanwhile; else the forge's new refresh token was lost, its old
// one dead (rotated), and the link had to be made again.
func TestTokenRefreshOutlivesTheCaller(t *testing.T) {
	e := &tokenEndpoint{answers: [][2]string{{"200", newToken}}}
	s, u, _ := newRefreshService(t, e)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s.o.HTTPClient = &http.Client{Transport: cancelAfterAnswer{cancel: cancel}}
	_, _ = s.Token(ctx, u, "gl") // its caller is gone: what it returns is nobody's
	tok, err := s.Token(context.Background(), u, "gl")
	if err != nil || tok.AccessToken != "new-access" || e.calls != 1 {
		t.Fatalf("Token after the first caller left = %+v, %v after %d refreshes; want the refreshed token, stored", tok, err, e.calls)
	}
	ls, _ := s.Links(context.Background(), u)
	if ls[0].Link.RefreshClaimedUntil != nil || ls[0].Link.RelinkReason != "" {
		t.Fatalf("link: %+v", ls[0].Link)
	}
}
