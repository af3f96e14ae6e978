package server_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/servertest"
)

// TestFollowedBuildLogEndsWithItsCredential: a followed build log (hangar logs -f, the web UI's
// log) lasts as long as the build; it ends at once, without the end line, when the credential that
// opened it may no longer be used: a bearer token revoked, a browser session signed out. Another
// user's revocation does not end it.
func TestFollowedBuildLogEndsWithItsCredential(t *testing.T) {
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			te := newTFEnv(t, engine)
			env := te.Env
			alice := createUser(t, env, "alice")
			createUser(t, env, "bob")
			p := worker{t, env, te.Prov, "host-1"}
			mustCall(t, env, alice, "POST", "/api/v1/workspaces", map[string]any{"name": "w", "template": "tf"}, http.StatusCreated, nil)
			job := p.mustAcquire("w", 1)
			p.log(job.ID, "l1")

			// follow opens the log with a bearer token or a session cookie; its lines arrive on the
			// channel, which closes when the stream ends.
			follow := func(token string, cookie *http.Cookie) <-chan sdk.BuildLog {
				t.Helper()
				req, err := http.NewRequestWithContext(t.Context(), "GET", env.URL+"/api/v1/workspaces/w/builds/1/logs?follow=true", nil)
				if err != nil {
					t.Fatal(err)
				}
				if token != "" {
					req.Header.Set("Authorization", "Bearer "+token)
				} else {
					req.AddCookie(cookie)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { resp.Body.Close() })
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("follow: %d", resp.StatusCode)
				}
				lines := make(chan sdk.BuildLog, 16)
				go func() {
					defer close(lines)
					sc := bufio.NewScanner(resp.Body)
					for sc.Scan() {
						var l sdk.BuildLog
						if json.Unmarshal(sc.Bytes(), &l) == nil {
							lines <- l
						}
					}
				}()
				if l := nextLine(t, lines); l.Output != "l1" {
					t.Fatalf("first followed line %+v, want l1", l)
				}
				return lines
			}

			var ci sdk.Token
			mustCall(t, env, alice, "POST", "/api/v1/tokens", sdk.CreateTokenRequest{Name: "ci"}, http.StatusCreated, &ci)
			byToken := follow(ci.Token, nil)
			byCookie := follow("", tokenSignIn(t, env, alice))
			cookie := tokenSignIn(t, env, alice)
			bySignedOut := follow("", cookie)

			// Another user's revocation: nothing ends.
			mustCall(t, env, env.AdminToken, "POST", "/api/v1/users/bob/token", nil, http.StatusOK, nil)
			p.log(job.ID, "l2")
			for _, ch := range []<-chan sdk.BuildLog{byToken, byCookie, bySignedOut} {
				if l := nextLine(t, ch); l.Output != "l2" {
					t.Fatalf("after another user's revocation: %+v, want l2", l)
				}
			}

			// The token revoked: its stream ends, without the end line; the others go on.
			mustCall(t, env, alice, "DELETE", "/api/v1/tokens/ci", nil, http.StatusOK, nil)
			streamEnds(t, byToken, "the revoked token's followed log")
			// Signed out: that session's stream ends.
			if status, body := cookieCall(t, env, cookie, "POST", "/signout", nil, nil); status != http.StatusOK {
				t.Fatalf("sign-out: %d %s", status, body)
			}
			streamEnds(t, bySignedOut, "the signed-out session's followed log")
			p.log(job.ID, "l3")
			if l := nextLine(t, byCookie); l.Output != "l3" {
				t.Fatalf("a live session's followed log: %+v, want l3", l)
			}
		})
	}
}

func nextLine(t *testing.T, ch <-chan sdk.BuildLog) sdk.BuildLog {
	t.Helper()
	select {
	case l, ok := <-ch:
		if !ok {
			t.Fatal("the followed log ended")
		}
		return l
	case <-time.After(deadline):
		t.Fatal("the followed log sent nothing")
	}
	return sdk.BuildLog{}
}

// streamEnds waits for the followed log to end with no further line (no end line either).
func streamEnds(t *testing.T, ch <-chan sdk.BuildLog, what string) {
	t.Helper()
	select {
	case l, ok := <-ch:
		if ok {
			t.Fatalf("%s: a line %+v, want the stream to end", what, l)
		}
	case <-time.After(deadline):
		t.Fatalf("%s: still open", what)
	}
}
