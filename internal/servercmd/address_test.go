package servercmd

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// startupText runs `hangar server` (Run) listening on listen, with the access URL accessURL ("":
// none), and returns what it prints up to its "Next:" hints, having checked that the loopback
// URL it names, if any, answers.
func startupText(t *testing.T, listen, accessURL string) string {
	t.Helper()
	cfg := Config{DataDir: filepath.Join(t.TempDir(), "data"), Listen: listen, AccessURL: accessURL}
	cfg.Provisioners, cfg.HeartbeatTimeout, cfg.PendingTimeout, cfg.PollInterval = "0", "5m", "30m", "30s"
	cfg.LifecycleInterval, cfg.PrebuildInterval, cfg.AuditRetention, cfg.AppsZone = "0", "0", "0", "none"
	cfg.LogLevel, cfg.LogFormat = "warn", "text"
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	ran := make(chan error, 1)
	go func() { ran <- Run(ctx, cfg, pw); pw.Close() }()
	defer func() {
		cancel()
		go func() { _, _ = io.Copy(io.Discard, pr) }()
		if err := <-ran; err != nil {
			t.Errorf("server: %v", err)
		}
	}()
	text := make(chan string, 1)
	go func() {
		var b strings.Builder
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			b.WriteString(sc.Text() + "\n")
			if strings.HasPrefix(sc.Text(), "Next:") {
				break
			}
		}
		text <- b.String()
	}()
	select {
	case s := <-text:
		// What it says is served: the loopback URL it names answers.
		if m := regexp.MustCompile(`(http://127\.0\.0\.1:\d+)`).FindStringSubmatch(s); m != nil {
			resp, err := http.Get(m[1] + "/healthz")
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Errorf("GET %s/healthz: %v %v", m[1], resp, err)
			}
			if resp != nil {
				resp.Body.Close()
			}
		}
		return s
	case err := <-ran:
		t.Fatalf("the server ended: %v", err)
	case <-time.After(deadline):
		t.Fatal("the server did not print its hints")
	}
	return ""
}

// TestPrintedAddress: what `hangar server` prints about where it is reached. On a loopback
// address, that URL. On all interfaces (0.0.0.0:PORT or :PORT), it says so, gives the loopback URL
// for this machine only, and says to set --access-url, whose hints use the loopback URL. With an
// access URL, the hints (web UI, hangar login) name it, wherever the server listens.
func TestPrintedAddress(t *testing.T) {
	port := regexp.MustCompile(`port (\d+) \(`)
	for _, listen := range []string{"0.0.0.0:0", ":0"} {
		t.Run(listen, func(t *testing.T) {
			out := startupText(t, listen, "")
			t.Logf("hangar server --listen %s printed:\n%s", listen, out)
			m := port.FindStringSubmatch(out)
			if m == nil || !strings.HasPrefix(out, "Hangar server listening on all interfaces, port "+m[1]+" (store: SQLite at ") {
				t.Fatalf("the first line does not say it listens on all interfaces:\n%s", out)
			}
			local := "http://127.0.0.1:" + m[1]
			for _, want := range []string{
				"On this machine: " + local + ". From other machines, use this host's name or address; set --access-url (HANGAR_ACCESS_URL) to that URL",
				"Web UI: " + local + "/ui/",
				"Next: hangar login --url " + local + " --token ",
			} {
				if !strings.Contains(out, want) {
					t.Errorf("the server does not print %q:\n%s", want, out)
				}
			}
			if strings.Contains(out, "0.0.0.0:"+m[1]+"/") || strings.Contains(out, "Access URL:") {
				t.Errorf("the server prints an address to browse that is not one:\n%s", out)
			}
		})
	}
	t.Run("all interfaces with an access URL", func(t *testing.T) {
		const access = "https://hangar.example.com"
		out := startupText(t, "0.0.0.0:0", access+"/")
		for _, want := range []string{"Hangar server listening on all interfaces, port ", "Access URL: " + access + "\n",
			"Web UI: " + access + "/ui/", "Next: hangar login --url " + access + " --token "} {
			if !strings.Contains(out, want) {
				t.Errorf("the server does not print %q:\n%s", want, out)
			}
		}
		if strings.Contains(out, "127.0.0.1") || strings.Contains(out, "On this machine") {
			t.Errorf("with an access URL, the server still points at loopback:\n%s", out)
		}
	})
	t.Run("loopback", func(t *testing.T) {
		out := startupText(t, "127.0.0.1:0", "")
		m := regexp.MustCompile(`^Hangar server listening on (http://127\.0\.0\.1:\d+) \(store: SQLite at `).FindStringSubmatch(out)
		if m == nil || !strings.Contains(out, "Next: hangar login --url "+m[1]+" --token ") || strings.Contains(out, "all interfaces") {
			t.Errorf("on loopback:\n%s", out)
		}
	})
}
