package proxy

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/clock"
	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/redirect"
)

// FuzzHandler sends arbitrary hosts, paths, cookies and Authorization headers through the proxy
// and checks what must always hold: the workspace is reached only with alice's credential on her
// host, it never sees the proxy's cookie or the bearer token, no answer is a 500, and every
// redirect goes to the server's /proxy/authorize or to a path on the same host.
func FuzzHandler(f *testing.F) {
	f.Add(aliceHost, "/", "", "Bearer hgu_alice", "text/html")
	f.Add(aliceHost, "/x?y=1", CookieName+"=hgw_alice; a=b", "", "text/html")
	f.Add(aliceHost, protocol.ProxyCallbackPath+"?code=hgc_1&path=//evil", "", "", "text/html")
	f.Add(aliceHost, protocol.ProxyCallbackPath+"?code=hgc_1&path=%2F", NonceCookieName+"=n1; "+NonceCookieName+"=n2", "", "text/html")
	f.Add("8080-dev--alice.WS.example.com.", "/", "", "Bearer hgu_alice", "*/*")
	f.Add("9000-dev--alice.ws.example.com", "/", "", "Bearer hgu_alice", "")
	f.Add(aliceHost+":443", "//evil.example.com/", "", "", "text/html")
	f.Add("evil.com", "/", CookieName+"=hgw_alice", "Bearer hgu_bob", "text/html")

	var reached atomic.Int64
	var leaked atomic.Value
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		if strings.Contains(r.Header.Get("Cookie"), CookieName) || strings.Contains(r.Header.Get("Authorization"), "hgu_") {
			leaked.Store(r.Header.Clone())
		}
		w.WriteHeader(http.StatusOK)
	}))
	f.Cleanup(up.Close)
	clk := clock.NewFake(time.Date(2026, 1, 1, 5, 0, 0, 0, time.UTC))
	checker := &fakeChecker{answers: map[string]protocol.ProxyCheckResponse{
		"hgu_alice": {Allowed: true, User: "alice", Workspace: "alice/dev", Status: "Running"},
		"hgw_alice": {Allowed: true, User: "alice", Workspace: "alice/dev", Status: "Running"},
		"hgu_bob":   {Reason: protocol.ProxyForbidden, User: "bob"},
	}}
	h := NewHandler(Options{
		// Only alice's host has a route; the checker answers by credential alone, so the route
		// table and the host check are what keeps the others out.
		Routes: staticRoutes{aliceHost: {Known: true, Addr: strings.TrimPrefix(up.URL, "http://")}},
		Auth:   &Auth{Checker: checker, Clock: clk}, Exchanger: &fakeExchanger{codes: map[string]protocol.ProxyExchangeResponse{}},
		ServerURL: "https://hangar.example.com", Zone: zone, MaxBodyBytes: 1 << 10, Clock: clk,
	})

	f.Fuzz(func(t *testing.T, host, path, cookie, auth, accept string) {
		req := httptest.NewRequest("GET", "http://placeholder/", nil)
		u, err := url.ParseRequestURI(path)
		if err != nil {
			return
		}
		req.URL, req.RequestURI, req.Host = u, path, host
		for k, v := range map[string]string{"Cookie": cookie, "Authorization": auth, "Accept": accept} {
			if v != "" {
				req.Header.Set(k, v)
			}
		}
		before := reached.Load()
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code >= 500 && rec.Code != http.StatusBadGateway && rec.Code != http.StatusServiceUnavailable {
			t.Fatalf("status %d for host %q path %q", rec.Code, host, path)
		}
		if l := leaked.Load(); l != nil {
			t.Fatalf("the workspace received the proxy's credential: %v", l)
		}
		if reached.Load() != before {
			name, _, _ := strings.Cut(strings.TrimSuffix(strings.ToLower(host), "."), ":")
			name = strings.TrimSuffix(name, ".")
			// The scheme in any case (RFC 9110).
			scheme, token, _ := strings.Cut(auth, " ")
			bearer := strings.EqualFold(scheme, "Bearer") && strings.TrimSpace(token) != ""
			alice := bearer && strings.TrimSpace(token) == "hgu_alice" || !bearer && strings.Contains(cookie, "hgw_alice")
			if name != aliceHost || !alice {
				t.Fatalf("the workspace was reached by host %q, cookie %q, authorization %q", host, cookie, auth)
			}
		}
		if loc := rec.Header().Get("Location"); loc != "" && !redirect.SafePath(loc) &&
			!strings.HasPrefix(loc, "https://hangar.example.com"+protocol.ProxyAuthorizePath+"?") {
			t.Fatalf("redirect to %q for host %q path %q", loc, host, path)
		}
	})
}
