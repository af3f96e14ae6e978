package postgres_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/hangar-dev/hangar/internal/store/postgres"
	"github.com/hangar-dev/hangar/internal/testutil/pgtest"
)

// TestPoolKeepsIdleConnections: after a burst that used every connection of the pool, all stay
// open, so that the next burst opens no session (database/sql's default kept 2; issue 10, item 6).
func TestPoolKeepsIdleConnections(t *testing.T) {
	ctx := context.Background()
	const n = 6
	s, err := postgres.OpenPool(ctx, pgtest.NewDatabase(t), postgres.Pool{MaxConns: n})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	burst := func() {
		var txs []*sql.Tx
		for i := 0; i < n; i++ { // each open transaction holds a connection of its own
			tx, err := s.DB().BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			txs = append(txs, tx)
		}
		for _, tx := range txs {
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
		}
	}
	burst()
	st := s.DB().Stats()
	if st.MaxOpenConnections != n || st.Idle != n || st.MaxIdleClosed != 0 {
		t.Fatalf("after a burst of %d: max open %d, idle %d, closed for the idle limit %d; want %d, %d, 0",
			n, st.MaxOpenConnections, st.Idle, st.MaxIdleClosed, n, n)
	}
	opened := st.OpenConnections
	burst()
	if st := s.DB().Stats(); st.OpenConnections != opened || st.MaxIdleClosed != 0 {
		t.Fatalf("a second burst changed the pool: %d open (was %d), %d closed for the idle limit", st.OpenConnections, opened, st.MaxIdleClosed)
	}
}

func TestPoolRefusesZero(t *testing.T) {
	if _, err := postgres.OpenPool(context.Background(), "postgres://127.0.0.1:1/none", postgres.Pool{}); err == nil {
		t.Fatal("a pool of 0 connections was accepted")
	}
}
