// Package servertest starts a real Hangar server (real store, real HTTP) for tests, with an injected
// fake clock, the admin bootstrapped, and helpers to register agents and users.
package servertest

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/clock"
	"github.com/hangar-dev/hangar/internal/server"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/store/postgres"
	"github.com/hangar-dev/hangar/internal/store/sqlite"
	"github.com/hangar-dev/hangar/internal/testutil/pgtest"
)

// Start is the fake clock's initial time.
var Start = time.Date(2026, 1, 1, 5, 0, 0, 0, time.UTC)

// Env is a running server.
type Env struct {
	URL        string
	AdminToken string
	Clock      *clock.Fake
	Store      store.Store
	Server     *server.Server
	DataDir    string
	// PostgresURL is the database's URL on the postgres engine ("" on SQLite): a second replica
	// opens its own store on it.
	PostgresURL string
}

// Engines are the store engines every server-level test runs on.
var Engines = []string{"sqlite", "postgres"}

// New starts a server on SQLite in a temporary data directory.
func New(t testing.TB) *Env { return NewWith(t, "sqlite") }

// Option changes the server's options before it starts (the store, clock and logger are set
// already).
type Option func(*server.Options)

// NewWith starts a server on the named engine ("sqlite" or "postgres"; Postgres is a fresh
// database on a real server, see pgtest).
func NewWith(t testing.TB, engine string, opts ...Option) *Env {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	var st store.Store
	var err error
	var pgURL string
	switch engine {
	case "sqlite":
		st, err = sqlite.Open(ctx, dir+"/hangar.db")
	case "postgres":
		pgURL = pgtest.NewDatabase(t)
		st, err = postgres.Open(ctx, pgURL)
	default:
		t.Fatalf("unknown engine %q", engine)
	}
	if err != nil {
		t.Fatalf("open %s store: %v", engine, err)
	}
	t.Cleanup(func() { st.Close() })
	clk := clock.NewFake(Start)
	so := server.Options{Store: st, Clock: clk, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for _, o := range opts {
		o(&so)
	}
	// The address first: the OIDC redirect URL is the server's.
	hs := httptest.NewUnstartedServer(nil)
	t.Cleanup(hs.Close)
	url := "http://" + hs.Listener.Addr().String()
	if so.OIDC != nil && so.OIDC.RedirectURL == "" {
		o := *so.OIDC
		o.RedirectURL = url + server.OIDCCallbackPath
		so.OIDC = &o
	}
	srv := server.New(so)
	path, created, err := srv.Bootstrap(ctx, dir)
	if err != nil || !created {
		t.Fatalf("bootstrap admin: created=%v err=%v", created, err)
	}
	token, err := readToken(path)
	if err != nil {
		t.Fatal(err)
	}
	hs.Config.Handler = srv.Handler()
	hs.Start()
	return &Env{URL: url, AdminToken: token, Clock: clk, Store: st, Server: srv, DataDir: dir, PostgresURL: pgURL}
}
