// Package sqlite opens Hangar's embedded store: a SQLite file in the data directory (pure Go,
// modernc.org/sqlite), in WAL mode with foreign keys on. Every transaction takes the write lock when it
// begins (_txlock=immediate), so read-modify-write transactions never lose an update or deadlock.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"

	sqlite3 "modernc.org/sqlite"
	sqlite3lib "modernc.org/sqlite/lib"

	"github.com/pressly/goose/v3"

	"github.com/hangar-dev/hangar/internal/store/sqlstore"
)

// Dialect is SQLite's.
var Dialect = sqlstore.Dialect{
	Name:      "sqlite",
	Goose:     goose.DialectSQLite3,
	BatchSize: 1000, // 9 parameters a row, under SQLite's 32766
	IsUniqueViolation: func(err error) bool {
		var e *sqlite3.Error
		return errors.As(err, &e) && (e.Code() == sqlite3lib.SQLITE_CONSTRAINT_UNIQUE || e.Code() == sqlite3lib.SQLITE_CONSTRAINT_PRIMARYKEY)
	},
}

// Open opens (creating if needed) the database file at path and migrates it.
func Open(ctx context.Context, path string) (*sqlstore.Store, error) {
	if err := privateFiles(path); err != nil {
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	q := url.Values{}
	q.Set("_txlock", "immediate")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "foreign_keys(1)")
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "synchronous(NORMAL)")
	db, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	db.SetMaxOpenConns(8)
	s, err := sqlstore.Open(ctx, db, Dialect)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	return s, nil
}
