package main_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestHelperURL: `hangar server --helper-url` (here through HANGAR_HELPER_URL) is the URL a
// Terraform workspace's helper is told to connect to, in hangar_agent's init script, apart from the
// access URL users reach the server at; the server says so at start; a bad one is refused, named.
// The URL is never dialled: the template only keeps the init script in its state.
func TestHelperURL(t *testing.T) {
	const helperURL = "http://10.99.0.2:7999"
	h := startLoggedIn(t, unisolated, "HANGAR_HELPER_URL="+helperURL+"/")
	dir := t.TempDir()
	module := `terraform {
  required_providers {
    hangar = { source = "hangar.dev/hangar/hangar" }
  }
}
resource "hangar_agent" "main" {}
`
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(module), 0o644); err != nil {
		t.Fatal(err)
	}
	h.must("templates", "push", "agent-only", "--directory", dir)
	h.must("create", "vm", "--template", "agent-only", "--wait", "--timeout", "2m")
	state := filepath.Join(t.TempDir(), "state.json")
	h.must("state", "pull", "vm", state)
	b, err := os.ReadFile(state)
	if err != nil {
		t.Fatal(err)
	}
	// The init script runs the helper with --connect-url (the state holds it as a JSON string).
	if !strings.Contains(string(b), "--connect-url '"+helperURL+"'") {
		t.Fatalf("the init script in the state does not name the helper URL %s:\n%s", helperURL, b)
	}
	if strings.Contains(string(b), h.url) {
		t.Fatalf("the init script names the access URL %s, want only the helper URL:\n%s", h.url, b)
	}

	bin := buildHangar(t)
	lines, _ := startServerOutput(t, bin, "--listen", "127.0.0.1:0", "--data-dir", t.TempDir(), "--provisioners", "0", "--helper-url", helperURL)
	timeout := time.After(time.Minute)
	for said := false; !said; {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatal("the server ended without naming the helper URL")
			}
			said = line == "Terraform workspaces' helpers connect to: "+helperURL
		case <-timeout:
			t.Fatal("the server did not name the helper URL within a minute")
		}
	}

	out, err := exec.Command(bin, "server", "--listen", "127.0.0.1:0", "--data-dir", t.TempDir(), "--helper-url", "10.99.0.2:7999").CombinedOutput()
	if err == nil || !strings.Contains(string(out), `--helper-url: want the server's http:// or https:// URL (no query), got "10.99.0.2:7999"`) {
		t.Fatalf("a helper URL without a scheme: %v\n%s", err, out)
	}
}
