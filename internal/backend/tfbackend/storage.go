package tfbackend

import (
	"context"
	"fmt"

	"github.com/hangar-dev/hangar/internal/errs"
	"github.com/hangar-dev/hangar/internal/store"
)

// DefaultMaxStoragePerUser is the default bound on the bytes of Terraform state and build log a
// user's workspaces keep (`hangar server --max-storage-per-user`; docs/decisions.md, "Per-user
// storage").
const DefaultMaxStoragePerUser = 1 << 30

// ErrStorageFull is a start or a create refused because its owner's builds keep more than the
// per-user storage bound, even after what the state rules do not need was freed.
var ErrStorageFull = errs.New(errs.Conflict, "storage limit reached")

// storageNote replaces the log of a build pruned for the bound.
const storageNote = "This build's log was removed: its owner's builds kept more than the server's storage limit per user (--max-storage-per-user)."

// storageError is nil when ownerID's builds keep at most the bound (or there is none), after
// pruning, if they kept more, the states and logs the state rules do not need
// (store.PruneStorage): every build but each workspace's latest. Otherwise it is ErrStorageFull,
// saying how much is kept and what to do. Only what grows asks (a create, a start): a stop or a
// delete is never refused, so that a user over the bound can still stop and free.
func (s *Service) storageError(ctx context.Context, ownerID string) error {
	max := s.opts.MaxStoragePerUser
	if max <= 0 || ownerID == "" {
		return nil
	}
	u, err := s.st.StorageUsage(ctx, ownerID)
	if err != nil {
		return err
	}
	if u.Total() <= max {
		return nil
	}
	before := u
	if u, err = s.st.PruneStorage(ctx, ownerID, s.now(), storageNote); err != nil {
		return err
	}
	s.log.Info("a user's builds kept more than the storage limit: older states and logs pruned", "owner", ownerID,
		"bytes_before", before.Total(), "bytes_after", u.Total(), "limit", max)
	if u.Total() <= max {
		return nil
	}
	return fmt.Errorf("%w: your workspaces' Terraform states and build logs take %s (states %s, logs %s), over the limit of %s per user, "+
		"even with only each workspace's latest build kept; stop or delete workspaces you no longer need, or ask an admin to raise --max-storage-per-user",
		ErrStorageFull, bytesText(u.Total()), bytesText(u.StateBytes), bytesText(u.LogBytes), bytesText(max))
}

// bytesText is n bytes for a person: 512 B, 3.1 MiB, 1.0 GiB.
func bytesText(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// ownerOf is the owner id of the workspace ref names ("" when it cannot be read: the build's own
// read then says why).
func (s *Service) ownerOf(ctx context.Context, ref store.WorkspaceRef) string {
	if ref.OwnerID != "" {
		return ref.OwnerID
	}
	w, err := s.st.Workspace(ctx, ref)
	if err != nil {
		return ""
	}
	return w.OwnerID
}
