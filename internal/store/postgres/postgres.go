// Package postgres opens Hangar's shared store: a Postgres database (pgx), for several server
// replicas. Read-modify-write transactions lock the rows they change (SELECT ... FOR UPDATE). A write
// that may make an agent's workspace pending, or that queues, cancels or reports on a provisioner
// job, sends NOTIFY on Channel in its transaction; each store keeps one connection that LISTENs to
// it (listen.go), so that an agent or provisioner waiting on any replica is woken by a change made
// through any other. It logs through slog's default logger.
package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/hangar-dev/hangar/internal/store/sqlstore"
)

// Dialect is Postgres's.
var Dialect = sqlstore.Dialect{
	Name:       "postgres",
	Goose:      goose.DialectPostgres,
	Dollar:     true,
	ForUpdate:  " FOR UPDATE",
	ForShare:   " FOR SHARE",
	BatchSize:  5000, // at most 9 parameters a row, under Postgres's 65535
	TextCast:   "::text",
	BigintCast: "::bigint",
	Notify:     "SELECT pg_notify('" + Channel + "', ?)",
	// An advisory lock held while migrating; the others retry every second, for up to 5 minutes.
	MigrationLocker: func() (lock.SessionLocker, error) {
		return lock.NewPostgresSessionLocker(lock.WithLockTimeout(1, 300))
	},
	IsUniqueViolation: func(err error) bool {
		var e *pgconn.PgError
		return errors.As(err, &e) && e.Code == "23505"
	},
}

// Open connects to the database at url (postgres://...) and migrates it.
func Open(ctx context.Context, url string) (*sqlstore.Store, error) {
	db, err := sql.Open("pgx", url)
	if err != nil {
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	db.SetMaxOpenConns(20)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("connect to postgres: %w", err)
	}
	s, err := sqlstore.Open(ctx, db, Dialect)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	// Listen for the other replicas' changes before answering anyone, so none is missed.
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	cfg.RuntimeParams["application_name"] = ListenerApplicationName
	lctx, stop := context.WithCancel(context.Background())
	ready := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		listen(lctx, cfg, s.Publish, ready, slog.Default().With("component", "postgres-listener"))
	}()
	s.OnClose(func() { stop(); <-done })
	select {
	case <-ready:
	case <-ctx.Done():
		s.Close()
		return nil, fmt.Errorf("listen for changes: %w", ctx.Err())
	case <-time.After(30 * time.Second):
		s.Close()
		return nil, fmt.Errorf("listen for changes: no connection after 30 s")
	}
	return s, nil
}
