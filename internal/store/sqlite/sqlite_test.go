package sqlite_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/store/sqlite"
	"github.com/hangar-dev/hangar/internal/store/storetest"
)

func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "hangar.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}

// TestUpgradeFromV1: a database written by schema version 1 keeps its rows through the rebuild of
// the workspaces table (migration 2).
func TestUpgradeFromV1(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hangar.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=foreign_keys(1)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	storetest.UpgradeFromV1(t, db, sqlite.Dialect, func(t *testing.T) store.Store {
		s, err := sqlite.Open(context.Background(), path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}

// TestUpgradeFromV2: a database written by schema version 2, builds included, keeps its rows
// through the second rebuild of the workspaces table (migration 3).
func TestUpgradeFromV2(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hangar.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=foreign_keys(1)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	storetest.UpgradeFromV2(t, db, sqlite.Dialect, func(t *testing.T) store.Store {
		s, err := sqlite.Open(context.Background(), path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}

// TestUpgradeToTokens: users' tokens and sessions survive migration 16 (API tokens).
func TestUpgradeToTokens(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hangar.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=foreign_keys(1)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	storetest.UpgradeToTokens(t, db, sqlite.Dialect, func(t *testing.T) store.Store {
		s, err := sqlite.Open(context.Background(), path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}
