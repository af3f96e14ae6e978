package servercmd

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hangar-dev/hangar/internal/server"
	"github.com/hangar-dev/hangar/internal/testutil/oidctest"
)

func TestOIDCOptions(t *testing.T) {
	secretFile := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secretFile, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	base := OIDCConfig{IssuerURL: "https://idp.example.com", ClientID: "hangar", ClientSecret: "s3cret", Scopes: "openid,email,profile", GroupsClaim: "groups"}
	with := func(f func(*OIDCConfig)) OIDCConfig { c := base; f(&c); return c }

	// None set: no OIDC (the defaults alone do not turn it on).
	if o, err := OIDCOptions(OIDCConfig{Scopes: "openid,email,profile", GroupsClaim: "groups"}, "http://127.0.0.1:7080"); o != nil || err != nil {
		t.Fatalf("no OIDC option: %+v, %v", o, err)
	}
	o, err := OIDCOptions(with(func(c *OIDCConfig) {
		c.ClientSecret, c.ClientSecretFile = "", secretFile
		c.AdminEmails, c.AllowedDomains, c.Scopes = "Boss@Example.com, ops@example.com", "@Example.com,corp.example", "openid email groups"
	}), "https://hangar.example.com/")
	if err != nil || o.ClientSecret != "s3cret" || o.RedirectURL != "https://hangar.example.com/oidc/callback" ||
		!slices.Equal(o.AdminEmails, []string{"boss@example.com", "ops@example.com"}) || !slices.Equal(o.AllowedDomains, []string{"example.com", "corp.example"}) ||
		!slices.Equal(o.Scopes, []string{"openid", "email", "groups"}) || o.NoProviderLogout {
		t.Fatalf("OIDCOptions = %+v, %v", o, err)
	}
	// --oidc-provider-logout=false: sign-out is Hangar's only; alone it does not turn OIDC on.
	if o, err := OIDCOptions(with(func(c *OIDCConfig) { c.ProviderLogout = "false" }), "https://hangar.example.com/"); err != nil || !o.NoProviderLogout {
		t.Fatalf("--oidc-provider-logout=false: %+v, %v", o, err)
	}
	if o, err := OIDCOptions(OIDCConfig{Scopes: "openid,email,profile", GroupsClaim: "groups", ProviderLogout: "true"}, "http://127.0.0.1:7080"); o != nil || err != nil {
		t.Fatalf("--oidc-provider-logout alone: %+v, %v", o, err)
	}
	if o, err := OIDCOptions(with(func(c *OIDCConfig) { c.IssuerURL = "http://127.0.0.1:5556/dex" }), "http://127.0.0.1:7080"); err != nil || o.IssuerURL != "http://127.0.0.1:5556/dex" {
		t.Fatalf("a loopback http issuer: %+v, %v", o, err)
	}

	for _, c := range []struct {
		cfg  OIDCConfig
		flag string
	}{
		{with(func(c *OIDCConfig) { c.IssuerURL = "" }), "--oidc-issuer-url"},
		{with(func(c *OIDCConfig) { c.IssuerURL = "http://idp.example.com" }), "--oidc-issuer-url"},
		{with(func(c *OIDCConfig) { c.IssuerURL = "idp.example.com" }), "--oidc-issuer-url"},
		{with(func(c *OIDCConfig) { c.IssuerURL = "https://idp.example.com/?x=1" }), "--oidc-issuer-url"},
		{with(func(c *OIDCConfig) { c.ClientID = "" }), "--oidc-client-id"},
		{with(func(c *OIDCConfig) { c.ClientSecret = "" }), "--oidc-client-secret-file"},
		{with(func(c *OIDCConfig) { c.ClientSecretFile = secretFile }), "--oidc-client-secret-file"},
		{with(func(c *OIDCConfig) { c.ClientSecret, c.ClientSecretFile = "", empty }), "--oidc-client-secret-file"},
		{with(func(c *OIDCConfig) { c.ClientSecret, c.ClientSecretFile = "", empty+".missing" }), "--oidc-client-secret-file"},
		{with(func(c *OIDCConfig) { c.Scopes = `openid,"email"` }), "--oidc-scopes"},
		{with(func(c *OIDCConfig) { c.GroupsClaim = "" }), "--oidc-groups-claim"},
		{with(func(c *OIDCConfig) { c.AdminEmails = "boss" }), "--oidc-admin-emails"},
		{with(func(c *OIDCConfig) { c.AllowedDomains = "exa mple" }), "--oidc-allowed-domains"},
		{with(func(c *OIDCConfig) { c.AllowedDomains = "*.example.com" }), "--oidc-allowed-domains"},
		{OIDCConfig{AdminGroup: "admins", GroupsClaim: "groups"}, "--oidc-issuer-url"},
	} {
		_, err := OIDCOptions(c.cfg, "http://127.0.0.1:7080")
		if err == nil || !strings.HasPrefix(err.Error(), c.flag+":") {
			t.Errorf("%+v: %v, want an error naming %s", c.cfg, err, c.flag)
		}
		if err != nil && strings.Contains(err.Error(), "s3cret") {
			t.Errorf("an error shows the secret: %v", err)
		}
	}
}

// TestRunWithOIDC: `hangar server` with the OIDC options offers the provider on its sign-in page
// and sends /oidc/login to it; the secret appears nowhere in what it prints.
func TestRunWithOIDC(t *testing.T) {
	p := oidctest.New(t, oidctest.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	cfg := Config{Listen: "127.0.0.1:0", DataDir: t.TempDir(), Provisioners: "0", HeartbeatTimeout: "5m", PendingTimeout: "30m",
		PollInterval: "30s", LogLevel: "error", LogFormat: "text", AppsZone: "none", LifecycleInterval: "0", PrebuildInterval: "0",
		OIDC: OIDCConfig{IssuerURL: p.Issuer(), ClientID: "hangar", ClientSecret: "the-s3cret", Scopes: "openid,email", GroupsClaim: "groups", Name: "Corp SSO"}}
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg, pw); pw.Close() }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	var url, printed string
	sc := bufio.NewScanner(pr)
	for sc.Scan() {
		printed += sc.Text() + "\n"
		if rest, ok := strings.CutPrefix(sc.Text(), "Hangar server listening on "); ok {
			url, _, _ = strings.Cut(rest, " ")
		}
		if strings.HasPrefix(sc.Text(), "Sign-out at the provider: ") {
			break
		}
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	if url == "" || !strings.Contains(printed, "its redirect URI: "+url+server.OIDCCallbackPath) || strings.Contains(printed, "s3cret") ||
		!strings.Contains(printed, "its post-logout redirect URI: "+url+server.OIDCSignedOutPath) {
		t.Fatalf("printed:\n%s", printed)
	}
	resp, err := http.Get(url + "/signin")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "Sign in with Corp SSO") {
		t.Fatalf("sign-in page: %s", body)
	}
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err = noRedirect.Get(url + server.OIDCLoginPath)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusFound || !strings.HasPrefix(loc, p.Issuer()+"/authorize?") ||
		!strings.Contains(loc, "code_challenge_method=S256") || !strings.Contains(loc, "client_id=hangar") {
		t.Fatalf("GET /oidc/login: %s to %q", resp.Status, loc)
	}
}
