package sqlite_test

import (
	"context"
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
