package server_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/coder/websocket"
	"github.com/hashicorp/yamux"
	"golang.org/x/crypto/ssh"

	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/server"
	"github.com/hangar-dev/hangar/internal/servertest"
	"github.com/hangar-dev/hangar/internal/wshelper"
	"github.com/hangar-dev/hangar/internal/wsmux"
)

// startHelperV1 connects a helper as those before protocol.WorkspaceAgentSubprotocolV2 did: it
// offers version 1 only, and serves SSH on every stream the server opens.
func startHelperV1(t *testing.T, url, token string) ssh.PublicKey {
	t.Helper()
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, "machine"), []byte("the module's machine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	srv, err := wshelper.NewServer(wshelper.ServerOptions{HostKey: signer, Env: []string{"PATH=/usr/bin:/bin", "HOME=" + home, "SHELL=/bin/sh"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	c, _, err := websocket.Dial(ctx, url+protocol.WorkspaceAgentConnectPath, &websocket.DialOptions{
		HTTPHeader: http.Header{"Authorization": {"Bearer " + token}}, Subprotocols: []string{protocol.WorkspaceAgentSubprotocol}})
	if err != nil {
		t.Fatal(err)
	}
	if c.Subprotocol() != protocol.WorkspaceAgentSubprotocol {
		t.Fatalf("the server chose %q for a helper that offers version 1 only", c.Subprotocol())
	}
	sess, err := yamux.Server(websocket.NetConn(context.Background(), c, websocket.MessageBinary), wsmux.Config())
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			st, err := sess.Accept()
			if err != nil {
				return
			}
			go func() { _ = srv.ServeTrusted(st) }()
		}
	}()
	t.Cleanup(func() {
		sess.Close()
		<-done
		sctx, scancel := context.WithTimeout(context.Background(), deadline)
		defer scancel()
		srv.Shutdown(sctx)
	})
	return signer.PublicKey()
}

// A helper of before version 2 keeps working with this server: its apps are reached over the
// server's SSH connection, as they were, and `hangar ssh` too.
func TestTerraformAppsVersion1Helper(t *testing.T) {
	ae := newAgentEnv(t, servertest.Engines[0], func(o *server.Options) {
		o.Apps = server.AppsOptions{Zone: "apps.test", Scheme: "http", ServerURL: "http://hangar.test:7080"}
	})
	env := ae.Env
	port := machineApp(t)
	host := strconv.Itoa(port) + "-tfw--dev.apps.test"
	hostKey := startHelperV1(t, env.URL, ae.job.AgentToken)
	waitRegistered(t, env, ae.dev, "tfw")

	resp, body := appGet(t, env, host, "/some/page", bearer(ae.dev))
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "hello from the machine; path /some/page") {
		t.Fatalf("an app through a version-1 helper: %d %s", resp.StatusCode, body)
	}
	if resp, body = appGet(t, env, host, "/big?bytes=1000000", bearer(ae.dev)); resp.StatusCode != http.StatusOK || len(body) != 1000000 {
		t.Fatalf("a download through a version-1 helper: %d, %d bytes", resp.StatusCode, len(body))
	}
	if resp, body = appGet(t, env, "1-tfw--dev.apps.test", "/", bearer(ae.dev)); resp.StatusCode != http.StatusBadGateway || !strings.Contains(body, "did not answer") {
		t.Fatalf("a closed port through a version-1 helper: %d %s", resp.StatusCode, body)
	}
	c, err := dialWorkspaceSSH(t, env, ae.dev, "tfw", hostKey)
	if err != nil {
		t.Fatalf("ssh through a version-1 helper: %v", err)
	}
	defer c.Close()
	s, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	out, err := s.Output("cat machine")
	if err != nil || string(out) != "the module's machine\n" {
		t.Fatalf("ssh through a version-1 helper: %q %v", out, err)
	}
}
