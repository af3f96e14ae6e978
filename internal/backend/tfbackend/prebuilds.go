package tfbackend

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"

	"github.com/hangar-dev/hangar/internal/audit"
	"github.com/hangar-dev/hangar/internal/build"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// The Terraform backend's side of prebuilt pools (the seed's "Prebuild Operations"): create a
// prebuilt workspace, delete one (destroy, or cancel a pending create and orphan-delete it), and
// claim a ready one for a user. The prebuild reconciler (package prebuilds) decides when.

// PrebuildsUser is the system user that owns prebuilt workspaces until claimed and initiates the
// reconciler's builds.
var PrebuildsUser = workspace.User{ID: store.PrebuildsUserID, Username: store.PrebuildsUsername, Admin: true}

// prebuildName is a new prebuilt workspace's name: prebuild- and 10 random letters or digits.
func prebuildName() string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, 10)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return "prebuild-" + string(b)
}

// CreatePrebuild creates a prebuilt workspace of the preset on the template version versionID: a
// start with is_prebuild from empty state (the seed's "Create prebuild").
func (s *Service) CreatePrebuild(ctx context.Context, p store.Preset, versionID string) (workspace.Workspace, error) {
	t := store.Template{ID: p.TemplateID, Name: p.TemplateName}
	spec := Spec{VersionID: versionID, Parameters: p.Parameters, PresetID: p.ID, IsPrebuild: true, Reason: build.ReasonPrebuild}
	var err error
	for range 3 { // a name already taken: another random one
		var w workspace.Workspace
		if w, _, err = s.Create(ctx, PrebuildsUser, prebuildName(), t, spec); !errors.Is(err, store.ErrConflict) {
			return w, err
		}
	}
	return workspace.Workspace{}, err
}

// DeletePrebuild deletes an unclaimed prebuilt workspace, why saying why. orphan: its create is
// still pending, so nothing was built; the create is canceled and the workspace orphan-deleted,
// Terraform not run (the seed's "Cancel pending + orphan"). Otherwise a delete build destroys what
// its last state holds (the seed's "Delete prebuild"). It reports false, doing nothing, when the
// workspace was claimed meanwhile, its create is no longer pending (orphan), or a build of it is
// running.
func (s *Service) DeletePrebuild(ctx context.Context, workspaceID, why string, orphan bool) (bool, error) {
	if orphan {
		last, err := s.st.BuildByNumber(ctx, workspaceID, 0)
		if err != nil {
			return false, err
		}
		rec, err := s.st.UpdateBuild(ctx, last.Job.ID, func(rec store.BuildRecord) (store.BuildRecord, error) {
			if rec.Workspace.OwnerID != store.PrebuildsUserID || rec.Build.Job.Status() != build.Pending {
				return rec, errAlreadyDone // claimed, or a provisioner took it: it is not cut short
			}
			nb, err := build.Cancel(*rec.Build, store.PrebuildsUsername, s.now())
			if err != nil {
				return rec, err
			}
			rec.Build = &nb
			rec.Workspace = applyState(rec.Workspace, nb, s.now())
			return rec, nil
		})
		if errors.Is(err, errAlreadyDone) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		s.ended(*rec.Build)
		s.appendLogs(ctx, last.Job.ID, build.StageCanceling, "warn", fmt.Sprintf("Canceled by %s before a provisioner picked it up: the prebuilt workspace is no longer wanted (%s).",
			store.PrebuildsUsername, why))
	}
	req := Request{Transition: build.Delete, Orphan: orphan, Reason: build.ReasonPrebuild}
	w, b, err := s.st.NewBuild(ctx, store.WorkspaceRef{ID: workspaceID}, func(rec store.BuildRecord) (workspace.Workspace, *build.Build, error) {
		w := rec.Workspace
		if w.OwnerID != store.PrebuildsUserID || build.CheckNew(rec.Build, build.Delete) != nil {
			return w, nil, nil // claimed, busy or deleted: nothing now
		}
		b := s.newBuild(PrebuildsUser, w, rec.Build, req, "")
		nw := s.afterBuild(w, b, req)
		nw.DesiredStateReason = "prebuild: " + why
		return nw, &b, nil
	})
	if err != nil || b == nil {
		return false, err
	}
	s.log.Info("prebuilt workspace deleted", "workspace", w.Name, "preset", w.PresetID, "why", why, "orphan", orphan, "build", b.Number)
	if b.Orphan {
		s.appendLogs(ctx, b.Job.ID, "Orphan delete", "warn",
			"Orphan delete: Terraform was not run; the prebuilt workspace's create was canceled before it ran, so nothing was built.")
		s.ended(*b)
	}
	return true, nil
}

// ClaimPrebuild hands a ready prebuilt workspace of the preset, on template version versionID, to
// u under name: in one transaction it becomes u's and gets a start build with is_prebuild_claim
// whose state is the prebuilt workspace's last (the seed's "Claim prebuild"). ok is false when no
// instance is ready; a name u already uses is store.ErrConflict.
//
// The claimed workspace's builds' states and logs become u's, and the claim's build holds a copy
// of its state: both count against the per-user storage bound. A user already over it (after the
// prune) is refused with ErrStorageFull, as a create would be; a user within it whom the claim
// would bring over gets, once u's older builds are pruned, a *ClaimOverStorageError: nothing is
// claimed, and a create from scratch goes ahead instead.
func (s *Service) ClaimPrebuild(ctx context.Context, u workspace.User, name string, p store.Preset, versionID string) (workspace.Workspace, build.Build, bool, error) {
	used, err := s.usageFor(ctx, u.ID, 0, "")
	if err != nil {
		return workspace.Workspace{}, build.Build{}, false, err
	}
	max := s.opts.MaxStoragePerUser
	for pruned := false; ; pruned = true {
		var moved int64
		w, b, ok, err := s.st.ClaimPrebuild(ctx, p.ID, versionID, func(rec store.BuildRecord) (workspace.Workspace, *build.Build, error) {
			w := rec.Workspace
			if err := build.CheckNew(rec.Build, build.Start); err != nil {
				return w, nil, err
			}
			req := Request{Transition: build.Start, Reason: build.ReasonInitiator}
			claimed := w.Name
			w.OwnerID, w.OwnerName, w.Name = u.ID, u.Username, name
			b := s.newBuild(u, w, rec.Build, req, versionID)
			b.IsPrebuildClaim = true
			if moved = rec.Kept.Total() + int64(len(b.State)); max > 0 && used.Total()+moved > max {
				return w, nil, errClaimTooBig
			}
			entry := audit.From(ctx)
			entry.SetTarget(audit.Workspace(w.ID, u.Username, name))
			entry.Set("claimed", store.PrebuildsUsername+"/"+claimed)
			entry.Set("preset", p.TemplateName+"/"+p.Name)
			entry.Set("is_prebuild_claim", true)
			auditBuild(entry, b)
			nw := s.afterBuild(w, b, req)
			nw.DesiredStateReason = ""
			// The claim is its owner's create and start: the lifecycle's times (max active and
			// TTL from DesiredStateUpdatedAt, dormancy from the last use, which is at least
			// CreatedAt) count from it, not from the prebuild's start.
			now := s.now()
			nw.CreatedAt, nw.ClaimedAt, nw.DesiredStateUpdatedAt = now, &now, now
			return nw, &b, nil
		})
		if errors.Is(err, errClaimTooBig) {
			if !pruned { // room may be made by pruning u's older builds: then try once more
				if used, err = s.prune(ctx, u.ID, used); err != nil {
					return workspace.Workspace{}, build.Build{}, false, err
				}
				if used.Total()+moved <= max {
					continue
				}
			}
			s.log.Info("a prebuilt workspace was not claimed: it would bring its claimer over the storage limit; building from scratch",
				"owner", u.Username, "preset", p.Name, "template", p.TemplateName, "bytes_kept", used.Total(), "bytes_claimed", moved, "limit", max)
			return workspace.Workspace{}, build.Build{}, false, &ClaimOverStorageError{Detail: fmt.Sprintf(
				"A prebuilt workspace of preset %q was ready, but not claimed: its Terraform states and build logs (%s) would have brought yours from %s to %s, "+
					"over the limit of %s per user (--max-storage-per-user). This workspace is built from scratch instead.",
				p.Name, bytesText(moved), bytesText(used.Total()), bytesText(used.Total()+moved), bytesText(max))}
		}
		if err != nil || !ok {
			return w, build.Build{}, ok, err
		}
		s.log.Info("prebuilt workspace claimed", "workspace", name, "owner", u.Username, "preset", p.Name, "template", p.TemplateName, "build", b.Number)
		return w, *b, true, nil
	}
}
