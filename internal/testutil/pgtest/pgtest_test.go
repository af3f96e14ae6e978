package pgtest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func connect(t *testing.T, u string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatalf("connect %s: %v", u, err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func currentDatabase(t *testing.T, conn *pgx.Conn) string {
	t.Helper()
	var name string
	if err := conn.QueryRow(context.Background(), "SELECT current_database()").Scan(&name); err != nil {
		t.Fatal(err)
	}
	return name
}

func TestNewDatabaseGivesDistinctUsableDatabases(t *testing.T) {
	ctx := context.Background()
	urlA, urlB := NewDatabase(t), NewDatabase(t)
	if urlA == urlB {
		t.Fatalf("two calls gave the same URL %s", urlA)
	}
	if !strings.HasPrefix(urlA, "postgres://") {
		t.Fatalf("URL %q is not a postgres:// URL", urlA)
	}
	a, b := connect(t, urlA), connect(t, urlB)
	nameA, nameB := currentDatabase(t, a), currentDatabase(t, b)
	if nameA == nameB || !strings.HasPrefix(nameA, dbPrefix) || !strings.HasPrefix(nameB, dbPrefix) {
		t.Fatalf("databases %q and %q: want two distinct %s* databases", nameA, nameB, dbPrefix)
	}

	if _, err := a.Exec(ctx, "CREATE TABLE widgets (id int PRIMARY KEY, name text NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Exec(ctx, "INSERT INTO widgets VALUES (1, 'one'), (2, 'two')"); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := a.QueryRow(ctx, "SELECT count(*) FROM widgets").Scan(&n); err != nil || n != 2 {
		t.Fatalf("count in A = %d, %v; want 2", n, err)
	}

	var visible bool
	if err := b.QueryRow(ctx, "SELECT to_regclass('widgets') IS NOT NULL").Scan(&visible); err != nil {
		t.Fatal(err)
	}
	if visible {
		t.Fatal("table created in database A is visible in database B")
	}
	var tables int
	if err := b.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'").Scan(&tables); err != nil {
		t.Fatal(err)
	}
	if tables != 0 {
		t.Fatalf("new database B has %d tables in public; want an empty database", tables)
	}
}

func TestNewDatabaseIsDroppedAtCleanup(t *testing.T) {
	var name string
	t.Run("uses", func(t *testing.T) {
		conn := connect(t, NewDatabase(t))
		name = currentDatabase(t, conn)
		// Leave the connection open: the drop must still succeed (WITH (FORCE)).
	})
	admin, err := adminURL(t)
	if err != nil {
		t.Fatal(err)
	}
	conn := connect(t, admin)
	var exists bool
	if err := conn.QueryRow(context.Background(),
		"SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		t.Fatal(err)
	}
	if exists {
		t.Fatalf("database %s still exists after its test ended", name)
	}
}

func TestNewDatabaseConcurrent(t *testing.T) {
	const n = 6
	var mu sync.Mutex
	seen := map[string]bool{}
	for i := 0; i < n; i++ {
		t.Run(fmt.Sprint("db", i), func(t *testing.T) {
			t.Parallel()
			u := NewDatabase(t)
			conn := connect(t, u)
			if _, err := conn.Exec(context.Background(), "CREATE TABLE t (x int)"); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			if seen[u] {
				t.Errorf("URL %s handed out twice", u)
			}
			seen[u] = true
		})
	}
}

func TestWithDatabase(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"postgres://u:p@h:5432/postgres?sslmode=disable", "postgres://u:p@h:5432/x?sslmode=disable"},
		{"postgresql://h/", "postgresql://h/x"},
		{"postgres://h", "postgres://h/x"},
	} {
		got, err := withDatabase(tc.in, "x")
		if err != nil || got != tc.want {
			t.Errorf("withDatabase(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	if _, err := withDatabase("mysql://h/db", "x"); err == nil {
		t.Error("withDatabase accepted a mysql:// URL")
	}
}
