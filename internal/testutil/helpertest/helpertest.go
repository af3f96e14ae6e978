//go:build unix

// Package helpertest runs a real workspace helper (wshelper.Server) for tests of what reaches
// one: the proxy's SSH side, the browser terminal.
package helpertest

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/hangar-dev/hangar/internal/wshelper"
)

// Start serves a workspace helper on 127.0.0.1, as in a workspace's pod: its shell /bin/sh, its
// home a directory of the test's, admitting only the key upstream (the proxy's). It stops with the
// test; Start returns its address.
func Start(t testing.TB, upstream ssh.PublicKey) string {
	t.Helper()
	dir := t.TempDir()
	keys := filepath.Join(dir, "authorized_keys")
	if err := os.WriteFile(keys, ssh.MarshalAuthorizedKey(upstream), 0o600); err != nil {
		t.Fatal(err)
	}
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	hostKey, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	helper, err := wshelper.NewServer(wshelper.ServerOptions{HostKey: hostKey, AuthorizedKeysFile: keys, Shell: "/bin/sh", Dir: dir,
		Env: []string{"PATH=/usr/bin:/bin", "HOME=" + dir}})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = helper.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		helper.Shutdown(ctx)
	})
	return ln.Addr().String()
}
