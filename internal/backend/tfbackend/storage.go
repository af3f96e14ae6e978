package tfbackend

import (
	"context"
	"errors"
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
// saying how much is kept and what to do. Only what grows asks (a create, a start, a state push,
// a claim): a stop or a delete is never refused, so that a user over the bound can still stop and
// free.
func (s *Service) storageError(ctx context.Context, ownerID string) error {
	return s.storageFor(ctx, ownerID, 0, "")
}

// storageFor is storageError for a request that adds adding bytes the user's builds keep (a
// pushed state's growth, a claimed prebuilt workspace's states and logs), what naming it for the
// refusal ("this state"): nil when usage + adding is within the bound, pruning first when it is
// not.
func (s *Service) storageFor(ctx context.Context, ownerID string, adding int64, what string) error {
	_, err := s.usageFor(ctx, ownerID, adding, what)
	return err
}

// usageFor is storageFor, also returning ownerID's usage (after the prune, if there was one).
func (s *Service) usageFor(ctx context.Context, ownerID string, adding int64, what string) (store.StorageUsage, error) {
	max := s.opts.MaxStoragePerUser
	if max <= 0 || ownerID == "" {
		return store.StorageUsage{}, nil
	}
	u, err := s.st.StorageUsage(ctx, ownerID)
	if err != nil {
		return u, err
	}
	if u.Total()+adding <= max {
		return u, nil
	}
	if u, err = s.prune(ctx, ownerID, u); err != nil {
		return u, err
	}
	if u.Total()+adding <= max {
		return u, nil
	}
	return u, storageFull(u, adding, what, max)
}

// prune frees what the state rules do not need of ownerID's builds (store.PruneStorage), logging
// it; before is the usage that made it prune.
func (s *Service) prune(ctx context.Context, ownerID string, before store.StorageUsage) (store.StorageUsage, error) {
	u, err := s.st.PruneStorage(ctx, ownerID, s.now(), storageNote)
	if err != nil {
		return u, err
	}
	s.log.Info("a user's builds kept more than the storage limit: older states and logs pruned", "owner", ownerID,
		"bytes_before", before.Total(), "bytes_after", u.Total(), "limit", s.opts.MaxStoragePerUser)
	return u, nil
}

// storageFull is ErrStorageFull for usage u (already pruned) and a request adding adding bytes
// (what names them; 0: a create or a start, refused because u alone is over).
func storageFull(u store.StorageUsage, adding int64, what string, max int64) error {
	kept := fmt.Sprintf("your workspaces' Terraform states and build logs take %s (states %s, logs %s)",
		bytesText(u.Total()), bytesText(u.StateBytes), bytesText(u.LogBytes))
	if adding > 0 {
		kept += fmt.Sprintf("; %s adds %s, which would make %s", what, bytesText(adding), bytesText(u.Total()+adding))
	}
	return fmt.Errorf("%w: %s, over the limit of %s per user, "+
		"even with only each workspace's latest build kept; stop or delete workspaces you no longer need, or ask an admin to raise --max-storage-per-user",
		ErrStorageFull, kept, bytesText(max))
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

// pushGrowth is the owner of the workspace ref names and how many bytes state, pushed, adds to
// what it keeps: its size less that of the latest build's state, which it replaces (in place
// without a build; with one, the older state becomes history the next prune frees). When the
// workspace cannot be read it is "", 0: the push's own transaction then says why.
func (s *Service) pushGrowth(ctx context.Context, ref store.WorkspaceRef, state []byte) (string, int64) {
	w, err := s.st.Workspace(ctx, ref)
	if err != nil {
		return "", 0
	}
	growth := int64(len(state))
	// The size only: a push must not hold the saved state besides its own (bounded bodies).
	if n, err := s.st.LatestStateBytes(ctx, w.ID); err == nil {
		growth -= n
	}
	return w.OwnerID, growth
}

// ClaimOverStorageError is a prebuilt workspace not claimed because its builds' states and logs,
// which a claim moves to the claiming user, would bring the user over the storage bound, though
// what the user keeps alone is within it. A create from scratch, admitted as any create is, is
// the way on; Detail says why, for the new build's log.
type ClaimOverStorageError struct{ Detail string }

func (e *ClaimOverStorageError) Error() string { return e.Detail }

// errClaimTooBig refuses, inside the claim's transaction, an instance too big for the claimer's
// room under the storage bound.
var errClaimTooBig = errors.New("the prebuilt workspace would bring its claimer over the storage limit")
