package store

import (
	"context"
	"time"

	"github.com/hangar-dev/hangar/internal/build"
	"github.com/hangar-dev/hangar/internal/prebuild"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// PrebuildsUserID is the system user that owns prebuilt workspaces until a user claims one, and
// initiates their builds (migration 15). Like AutomationUserID: no token finds it and no username
// lookup returns it.
const PrebuildsUserID = "00000000-0000-4000-8000-00000000b0b1"

// PrebuildsUsername is its name.
const PrebuildsUsername = "hangar-prebuilds"

// Preset is a template's named pool of prebuilt workspaces: what they are built from (a version,
// parameters) and how many are kept ready.
type Preset struct {
	ID           string
	TemplateID   string
	TemplateName string // filled on reads
	Name         string
	// VersionID pins a template version; "" follows the template's active version.
	VersionID     string
	VersionNumber int // filled on reads (0 when VersionID is "")
	// Parameters are passed to the module's builds like the variables Hangar offers.
	Parameters map[string]string
	Pool       prebuild.Pool
	CreatedBy  string
	CreatedAt  time.Time
	UpdatedAt  time.Time
	// DeletedAt is set once the preset is deleted: the reconciler deletes its unclaimed instances,
	// then the row.
	DeletedAt    *time.Time
	ReconciledAt *time.Time
}

// PrebuildInstance is an unclaimed prebuilt workspace with its latest build (without its state).
type PrebuildInstance struct {
	Workspace workspace.Workspace
	Build     *build.Build
}

// PresetStore is the persistence of prebuilt pools.
type PresetStore interface {
	// PutPreset creates or replaces the preset of p.TemplateID named p.Name (a deleted one of that
	// name comes back); p.ID is used when it is created. It returns the preset as stored.
	PutPreset(ctx context.Context, p Preset) (Preset, error)
	// ListPresets lists a template's presets by name ("" lists every template's), deleted ones
	// only if deleted.
	ListPresets(ctx context.Context, templateID string, deleted bool) ([]Preset, error)
	// PresetByName reads a template's preset that is not deleted.
	PresetByName(ctx context.Context, templateID, name string) (Preset, error)
	// DeletePreset marks a template's preset deleted at now (ErrNotFound if none).
	DeletePreset(ctx context.Context, templateID, name string, now time.Time) error
	// PurgePreset removes a deleted preset's row, if no unclaimed instance of it is left; it
	// reports whether it did.
	PurgePreset(ctx context.Context, id string) (bool, error)
	// LeasePreset takes the preset for owner until until, unless another owner holds it past now;
	// it reports whether owner holds it. With several replicas, one reconciles a preset at a time.
	LeasePreset(ctx context.Context, id, owner string, now, until time.Time) (bool, error)
	// ReleasePreset ends owner's lease and records now as the preset's last reconcile.
	ReleasePreset(ctx context.Context, id, owner string, now time.Time) error
	// PrebuildInstances lists the unclaimed prebuilt workspaces (owned by PrebuildsUserID, not
	// Terminated) of a preset ("" for every preset's), oldest first, with their latest builds.
	PrebuildInstances(ctx context.Context, presetID string) ([]PrebuildInstance, error)
	// PresetFailures returns the preset's failed prebuild creates since its last successful one,
	// oldest first, at most limit (the latest).
	PresetFailures(ctx context.Context, presetID string, limit int) ([]PresetFailure, error)
	// ClaimPrebuild picks, in one transaction, a ready instance of the preset on versionID (its
	// latest build a successful start of that version, the workspace Running) that no concurrent
	// claim holds (Postgres: FOR UPDATE SKIP LOCKED; SQLite: the single writer), and passes it to
	// fn, with what its builds keep (BuildRecord.Kept), which returns the workspace row (its new owner and name) and the claim's build. The row,
	// the build and its job are written and the job announced; ErrConflict if the new owner has a
	// workspace of that name that is not Terminated. ok is false when no instance is ready. An
	// error of fn writes nothing and is returned.
	ClaimPrebuild(ctx context.Context, presetID, versionID string, fn func(rec BuildRecord) (workspace.Workspace, *build.Build, error)) (w workspace.Workspace, b *build.Build, ok bool, err error)
}

// PresetFailure is a failed prebuild create: when it ended, and its build's error.
type PresetFailure struct {
	At    time.Time
	Error string
}
