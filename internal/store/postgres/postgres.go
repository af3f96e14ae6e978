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

// Pool sizes the store's pool of database connections (the LISTEN connection is not in it).
type Pool struct {
	// MaxConns caps the open connections; all of them are kept open when idle, since opening one
	// costs a server process and a round of authentication (tens of milliseconds under load:
	// docs/benchmarks.md, "Load: 1,000 agents × 100 workspaces").
	MaxConns int
	// MaxIdleTime closes a connection unused for that long (0: never), so that a replica gives back
	// to the database what a burst made it open.
	MaxIdleTime time.Duration
	// MaxLifetime closes a connection that old once it is idle (0: never), so that the pool moves to
	// a new primary or balancer target and Postgres frees a backend's cached memory now and then.
	MaxLifetime time.Duration
}

// DefaultMaxConns is the default of --postgres-max-conns (docs/decisions.md, "Postgres
// connection pool").
const DefaultMaxConns = 20

// DefaultPool is the pool Open uses.
var DefaultPool = Pool{MaxConns: DefaultMaxConns, MaxIdleTime: 5 * time.Minute, MaxLifetime: time.Hour}

// Open connects to the database at url (postgres://...) with DefaultPool and migrates it.
func Open(ctx context.Context, url string) (*sqlstore.Store, error) {
	return OpenPool(ctx, url, DefaultPool)
}

// OpenPool is Open with a pool of the given size.
func OpenPool(ctx context.Context, url string, pool Pool) (*sqlstore.Store, error) {
	if pool.MaxConns < 1 {
		return nil, fmt.Errorf("open postgres: a pool of %d connections: want at least 1", pool.MaxConns)
	}
	db, err := sql.Open("pgx", url)
	if err != nil {
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	db.SetMaxOpenConns(pool.MaxConns)
	// database/sql keeps only 2 idle connections by default: under steady load most requests then
	// found none and opened a new one (issue 10, item 6).
	db.SetMaxIdleConns(pool.MaxConns)
	db.SetConnMaxIdleTime(pool.MaxIdleTime)
	db.SetConnMaxLifetime(pool.MaxLifetime)
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
