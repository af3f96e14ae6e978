package servertest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hangar-dev/hangar/internal/backend/tfbackend"
	"github.com/hangar-dev/hangar/internal/clock"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/server"
	"github.com/hangar-dev/hangar/internal/store/postgres"
	"github.com/hangar-dev/hangar/internal/testutil/pgtest"
	"github.com/hangar-dev/hangar/internal/tfmodule"
)

// Replicas are n server replicas on one fresh Postgres database, each with its own store, Terraform
// backend and HTTP server, sharing one fake clock; the admin is bootstrapped through the first.
type Replicas struct {
	Servers  []*server.Server
	Backends []*tfbackend.Service
	URLs     []string
	Clock    *clock.Fake
	Admin    *sdk.Client
}

// NewReplicas starts n replicas (replica ids r0, r1, ...).
func NewReplicas(t testing.TB, n int) *Replicas {
	t.Helper()
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	r := &Replicas{Clock: clock.NewFake(Start)}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for i := range n {
		st, err := postgres.Open(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		bld := tfbackend.New(tfbackend.Options{Store: st, Clock: r.Clock, Logger: log})
		srv := server.New(server.Options{Store: st, Clock: r.Clock, Logger: log, Builder: bld, ReplicaID: fmt.Sprintf("r%d", i)})
		hs := httptest.NewServer(srv.Handler())
		t.Cleanup(hs.Close)
		r.Servers, r.Backends, r.URLs = append(r.Servers, srv), append(r.Backends, bld), append(r.URLs, hs.URL)
	}
	tokenFile, _, err := r.Servers[0].Bootstrap(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	token, err := os.ReadFile(tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	if r.Admin, err = sdk.New(r.URLs[0], strings.TrimSpace(string(token))); err != nil {
		t.Fatal(err)
	}
	return r
}

// PushStartCountModule pushes a terraform template that declares start_count and nothing else.
func (r *Replicas) PushStartCountModule(t testing.TB, name string) {
	t.Helper()
	mod := t.TempDir()
	if err := os.WriteFile(filepath.Join(mod, "main.tf"), []byte("variable \"start_count\" {\n  type = number\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	archive, err := tfmodule.Pack(mod)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Admin.PushTemplateVersion(context.Background(), name, sdk.CreateTemplateVersionRequest{Kind: "terraform", Archive: archive}); err != nil {
		t.Fatal(err)
	}
}
