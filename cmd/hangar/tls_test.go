package main_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/testutil/testca"
)

// TestTLSThroughTheBinary: `hangar server --tls-cert-file --tls-key-file` (as environment
// variables) serves HTTPS, and the real CLI and a real `hangar provisioner` reach it through the
// system's certificate pool, which SSL_CERT_FILE extends with a private CA (no flag of Hangar's).
func TestTLSThroughTheBinary(t *testing.T) {
	ca := testca.New(t)
	dir := t.TempDir()
	certPEM, keyPEM := ca.Issue(t, "127.0.0.1", "localhost")
	files := map[string][]byte{"ca.pem": ca.CertPEM, "tls.crt": certPEM, "tls.key": keyPEM}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("SSL_CERT_FILE", filepath.Join(dir, "ca.pem"))
	h := startLoggedIn(t, "HANGAR_TLS_CERT_FILE="+filepath.Join(dir, "tls.crt"), "HANGAR_TLS_KEY_FILE="+filepath.Join(dir, "tls.key"),
		"HANGAR_PROVISIONERS=0")
	if !strings.HasPrefix(h.url, "https://") {
		t.Fatalf("the server listens on %s, want https://", h.url)
	}
	out := h.must("provisioners", "create", "p1")
	m := regexp.MustCompile(`Token \(shown only once\): (\S+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("provisioners create: %s", out)
	}
	tokenFile := filepath.Join(dir, "p1.token")
	if err := os.WriteFile(tokenFile, []byte(m[1]+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	prov := exec.Command(h.bin, "provisioner", "--server", h.url, "--token-file", tokenFile, "--work-dir", filepath.Join(dir, "work"))
	prov.Env = h.env
	var provLog syncBuffer
	prov.Stdout, prov.Stderr = &provLog, &provLog
	if err := prov.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = prov.Process.Kill()
		_ = prov.Wait()
		if t.Failed() {
			t.Logf("provisioner log:\n%s", provLog.String())
		}
	})
	// The provisioner's long-poll reaches the server: it is seen (a real server on a real clock:
	// look again until a deadline).
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for ; ; <-tick.C {
		out := h.must("provisioners", "list")
		if strings.Contains(out, "p1") && !strings.Contains(out, "never") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the provisioner never reached the server over TLS:\n%s", out)
		}
	}

	// With another CA, the CLI refuses the server's certificate, and says so.
	env := make([]string, 0, len(h.env))
	for _, e := range h.env {
		if !strings.HasPrefix(e, "SSL_CERT_FILE=") {
			env = append(env, e)
		}
	}
	cmd := exec.Command(h.bin, "provisioners", "list")
	other := filepath.Join(dir, "other-ca.pem")
	if err := os.WriteFile(other, testca.New(t).CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd.Env = append(env, "SSL_CERT_FILE="+other)
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "certificate") {
		t.Errorf("a CLI that does not trust the CA: %v\n%s", err, out)
	}
}
