package postgres_test

import (
	"context"
	"testing"

	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/store/postgres"
	"github.com/hangar-dev/hangar/internal/store/storetest"
	"github.com/hangar-dev/hangar/internal/testutil/pgtest"
)

func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		s, err := postgres.Open(context.Background(), pgtest.NewDatabase(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}
