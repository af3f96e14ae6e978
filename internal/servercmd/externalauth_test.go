package servercmd

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestExternalAuthOptions(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	secret := write("secret", "s3cret\n")
	cfg := write("forges.yaml", "providers:\n  - {id: github, type: github, client_id: abc, client_secret_file: "+secret+"}\n")
	key := write("key", "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=\n")
	if p, k, err := ExternalAuthOptions(ExternalAuthConfig{}); p != nil || k != nil || err != nil {
		t.Fatalf("none: %v %v %v", p, k, err)
	}
	p, k, err := ExternalAuthOptions(ExternalAuthConfig{ConfigFile: cfg, KeyFile: key})
	if err != nil || len(p) != 1 || p[0].ClientSecret != "s3cret" || k == nil {
		t.Fatalf("forges: %+v %v %v", p, k, err)
	}
	for _, tc := range []struct {
		c    ExternalAuthConfig
		want string
	}{
		{ExternalAuthConfig{ConfigFile: cfg}, "--external-auth-key-file: required with --external-auth-config"},
		{ExternalAuthConfig{KeyFile: key}, "--external-auth-key-file: given without --external-auth-config"},
		{ExternalAuthConfig{ConfigFile: cfg, KeyFile: write("short", "c2hvcnQ=")}, "--external-auth-key-file " + dir + "/short: line 1: the key is 5 bytes, want 32"},
		{ExternalAuthConfig{ConfigFile: write("bad.yaml", "providers:\n  - {id: gl, type: gitlab, client_secret_file: "+secret+"}\n"), KeyFile: key},
			"bad.yaml: external auth config: providers[0] (gl): client_id: required"},
		{ExternalAuthConfig{ConfigFile: filepath.Join(dir, "missing.yaml"), KeyFile: key}, "--external-auth-config: open"},
	} {
		if _, _, err := ExternalAuthOptions(tc.c); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.c, err, tc.want)
		}
	}
}

// TestRunWithExternalAuth: the server started with a forge prints its redirect URI (never the
// secret) and lists it; without a key it does not start.
func TestRunWithExternalAuth(t *testing.T) {
	dir := t.TempDir()
	cfgFile := filepath.Join(dir, "forges.json")
	if err := os.WriteFile(cfgFile, []byte(`{"providers":[{"id":"work","type":"gitea","client_id":"cid","client_secret_env":"HANGAR_TEST_FORGE_SECRET","base_url":"https://git.example.com"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(dir, "key")
	if err := os.WriteFile(keyFile, []byte("MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HANGAR_TEST_FORGE_SECRET", "forge-s3cret")
	base := Config{Listen: "127.0.0.1:0", DataDir: t.TempDir(), Provisioners: "0", HeartbeatTimeout: "5m", PendingTimeout: "30m",
		PollInterval: "30s", LogLevel: "error", LogFormat: "text", AppsZone: "none", LifecycleInterval: "0", PrebuildInterval: "0"}
	noKey := base
	noKey.ExternalAuth = ExternalAuthConfig{ConfigFile: cfgFile}
	if err := Run(context.Background(), noKey, io.Discard); err == nil || !strings.Contains(err.Error(), "--external-auth-key-file: required") {
		t.Fatalf("Run without a key: %v", err)
	}
	cfg := base
	cfg.ExternalAuth = ExternalAuthConfig{ConfigFile: cfgFile, KeyFile: keyFile}
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg, pw); pw.Close() }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	var url, printed, token string
	sc := bufio.NewScanner(pr)
	for sc.Scan() {
		printed += sc.Text() + "\n"
		if rest, ok := strings.CutPrefix(sc.Text(), "Hangar server listening on "); ok {
			url, _, _ = strings.Cut(rest, " ")
		}
		if strings.HasPrefix(sc.Text(), "Forge work ") {
			break
		}
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	if url == "" || !strings.Contains(printed, "Forge work (gitea, client cid): its OAuth2 application's redirect URI: "+url+"/external-auth/work/callback") ||
		strings.Contains(printed, "forge-s3cret") {
		t.Fatalf("printed:\n%s", printed)
	}
	tok, err := os.ReadFile(filepath.Join(cfg.DataDir, "admin-token"))
	if err != nil {
		t.Fatal(err)
	}
	token = strings.TrimSpace(string(tok))
	req, _ := http.NewRequest("GET", url+"/api/v1/external-auth", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var l struct {
		Providers []struct{ ID, Type, Name string }
	}
	if err := json.NewDecoder(resp.Body).Decode(&l); err != nil || len(l.Providers) != 1 || l.Providers[0].ID != "work" || l.Providers[0].Type != "gitea" {
		t.Fatalf("GET /api/v1/external-auth: %s %+v %v", resp.Status, l, err)
	}
}
