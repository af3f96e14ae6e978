package proxy

import (
	"crypto/tls"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/clock"
	"github.com/hangar-dev/hangar/internal/testutil/testca"
)

func TestCertFilesReload(t *testing.T) {
	dir := t.TempDir()
	ca := testca.New(t)
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	write := func(names ...string) {
		cert, key := ca.Issue(t, names...)
		if err := os.WriteFile(certFile, cert, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(keyFile, key, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("*.a.example.com")
	clk := clock.NewFake(time.Date(2026, 1, 1, 5, 0, 0, 0, time.UTC))
	c, err := LoadCertFiles(certFile, keyFile, clk, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	name := func() string {
		cert, err := c.GetCertificate(&tls.ClientHelloInfo{})
		if err != nil {
			t.Fatal(err)
		}
		return cert.Leaf.DNSNames[0]
	}
	if got := name(); got != "*.a.example.com" {
		t.Fatalf("certificate for %s", got)
	}
	write("*.b.example.com")
	// Make the change visible to the modification time whatever the file system's granularity.
	later := time.Now().Add(time.Minute)
	_ = os.Chtimes(certFile, later, later)
	if got := name(); got != "*.a.example.com" {
		t.Errorf("reloaded before 10 s: %s", got)
	}
	clk.Advance(10 * time.Second)
	if got := name(); got != "*.b.example.com" {
		t.Errorf("not reloaded after 10 s: %s", got)
	}
	// A broken file keeps the previous certificate.
	if err := os.WriteFile(keyFile, []byte("nope"), 0o600); err != nil {
		t.Fatal(err)
	}
	_ = os.Chtimes(keyFile, later.Add(time.Minute), later.Add(time.Minute))
	clk.Advance(10 * time.Second)
	if got := name(); got != "*.b.example.com" {
		t.Errorf("after a broken key: %s", got)
	}
	if _, err := LoadCertFiles(certFile, keyFile, clk, slog.New(slog.DiscardHandler)); err == nil {
		t.Error("a broken key loads")
	}
}
