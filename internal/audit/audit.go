// Package audit is Hangar's audit log: who did what to which object, when, and how it ended
// (terraform-state-management.md, "Audit Log Fields"). It holds the entry, the action names and
// the recorder that writes entries; it knows no HTTP and no SQL (the store keeps entries, the
// server serves them).
//
// Recording an action is two calls around it:
//
//	ctx, p := rec.Begin(ctx, actor, audit.TemplatePromote, audit.Target{Kind: audit.KindTemplate, Name: name})
//	err := doTheAction(ctx, ...)            // the store writes p's entry in the action's transaction
//	rec.End(ctx, p, err)                    // a failure (or an action without one) is written here
//
// While the action runs, the entry is pending in ctx: code that learns more (the build number,
// the workspace's id) adds it with From(ctx).Set / .SetTarget. The store's write methods that
// are actions (documented on store.Store: "audited") insert the pending entry, as a success, in
// their own transaction, so that nothing is recorded that did not happen and nothing happens
// unrecorded. When the action fails, End writes the entry as a failure with the error's message.
// An action that needed no transaction, or a one-shot event, is written by End or by Record.
package audit

import (
	"context"
	"log/slog"
	"maps"
	"sync"
	"time"
)

// Action names what was done. Names are "object.verb"; they are stable (filters and retention
// rules refer to them).
type Action string

// The actions Hangar records.
const (
	WorkspaceCreate     Action = "workspace.create"
	WorkspaceTransition Action = "workspace.transition" // a desired-state change, by a user or the automation
	WorkspaceDormant    Action = "workspace.dormant"    // the automation marked a workspace dormant
	WorkspaceSchedule   Action = "workspace.schedule"
	BuildCreate         Action = "build.create"
	BuildCancel         Action = "build.cancel"
	StatePush           Action = "state.push" // details: with_build; never the state itself
	AgentCreate         Action = "agent.create"
	UserCreate          Action = "user.create"
	UserToken           Action = "user.token" // a new token (the old one stops working)
	ProvisionerCreate   Action = "provisioner.create"
	TemplatePush        Action = "template.push"
	TemplateLifecycle   Action = "template.lifecycle"
	TemplatePromote     Action = "template.promote" // details: version
	TemplateDelete      Action = "template.delete"  // refused (409) while workspaces or presets use it
	WorkspaceUpdate     Action = "workspace.update" // hangar update: to the active version, with new parameter values
	Forbidden           Action = "api.forbidden"    // a user tried an admin's action (target: METHOD PATH)
	PresetPut           Action = "preset.put"
	PresetDelete        Action = "preset.delete"
	PrebuildCreate      Action = "prebuild.create"  // the prebuild reconciler built a prebuilt workspace
	PrebuildDelete      Action = "prebuild.delete"  // details: why (outdated, failed, extra, preset deleted), orphan
	SignIn              Action = "signin"           // the server's sign-in (details: method token or oidc)
	SignInWorkspace     Action = "signin.workspace" // a proxy exchanged a one-time code for a workspace session
	SSHKeyAdd           Action = "ssh_key.add"
	SSHKeyRemove        Action = "ssh_key.remove"
	TokenCreate         Action = "token.create"         // details: expires_at; never the secret
	TokenRevoke         Action = "token.revoke"         // target: the token (its owner in details)
	UserSuspend         Action = "user.suspend"         // details: suspended (false: reinstated), stopped workspaces
	UserDelete          Action = "user.delete"          // the user is marked deleted; its name stays taken
	AgentUpdate         Action = "agent.update"         // PATCH of the config; details: the fields changed
	AgentToken          Action = "agent.token"          // details: revoked (true: no new token)
	ProvisionerToken    Action = "provisioner.token"    // details: revoked (true: no new token)
	ExternalAuthLink    Action = "external_auth.link"   // target: the forge; details: the account's login; never a token
	ExternalAuthUnlink  Action = "external_auth.unlink" // target: the forge
	GitSSHRotate        Action = "git_ssh.rotate"       // target: the user; details: the new key's fingerprint
	UserProfile         Action = "user.profile"         // a user changed their profile; details: the fields changed
)

// Target kinds.
const (
	KindWorkspace   = "workspace"
	KindUser        = "user"
	KindAgent       = "agent"
	KindTemplate    = "template"
	KindProvisioner = "provisioner"
	KindSSHKey      = "ssh_key"
	KindForge       = "forge"  // a forge of the external auth config, by its id
	KindPreset      = "preset" // named TEMPLATE/PRESET
	KindToken       = "token"  // named USER/TOKEN-NAME
)

// Outcome is how the action ended.
type Outcome string

// Outcomes.
const (
	Success Outcome = "success"
	Failure Outcome = "failure"
)

// Actor is who acted: a user (the automation's system user included). An unknown actor (a failed
// sign-in) has neither.
type Actor struct {
	ID   string
	Name string
}

// Target is what was acted on. Name is what a person calls it: a workspace's "owner/name", a
// user's, agent's, template's or provisioner's name, a key's fingerprint.
type Target struct {
	Kind string
	ID   string
	Name string
}

// Entry is one record of the audit log.
type Entry struct {
	ID      int64 // assigned by the store, increasing
	Time    time.Time
	Actor   Actor
	Action  Action
	Target  Target
	Outcome Outcome
	// Error is the failure's message ("" on success).
	Error string
	// Details are what else matters of the action (a transition's reason, a build's number,
	// transition and template_version_id). Never a secret or a Terraform state.
	Details map[string]any
}

// MaxErrorBytes bounds an entry's error message.
const MaxErrorBytes = 2000

// Pending is an action's entry while the action runs. Its methods are safe on nil (no entry is
// pending) and for concurrent use.
type Pending struct {
	mu        sync.Mutex
	e         Entry
	written   bool
	discarded bool
}

type ctxKey struct{}

// With returns ctx carrying p.
func With(ctx context.Context, p *Pending) context.Context {
	return context.WithValue(ctx, ctxKey{}, p)
}

// From returns the entry pending in ctx, or nil.
func From(ctx context.Context) *Pending {
	p, _ := ctx.Value(ctxKey{}).(*Pending)
	return p
}

// Set adds a detail.
func (p *Pending) Set(key string, value any) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.e.Details == nil {
		p.e.Details = map[string]any{}
	}
	p.e.Details[key] = value
}

// SetTarget names the target once it is known (a workspace's id, read inside the action).
func (p *Pending) SetTarget(t Target) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.e.Target = t
}

// SetActor names the actor once it is known (a sign-in's user).
func (p *Pending) SetActor(a Actor) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.e.Actor = a
}

// Discard says the action turned out to be no action (the automation found on the locked row
// that nothing was due any more): nothing is recorded.
func (p *Pending) Discard() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.discarded = true
}

// Take returns the entry to write, as a success, in the transaction that makes the action; ok is
// false when there is none (nothing pending, already written, or discarded). The writer calls
// Written once its transaction committed.
func (p *Pending) Take() (Entry, bool) {
	if p == nil {
		return Entry{}, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.written || p.discarded {
		return Entry{}, false
	}
	e := p.e
	e.Details = maps.Clone(e.Details)
	e.Outcome = Success
	return e, true
}

// Written records that the entry Take returned was committed.
func (p *Pending) Written() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.written = true
}

// finish returns the entry End must write: a failure when err is not nil (unless it was written
// as a success, which cannot happen: a transaction that failed wrote nothing), else a success
// not written yet.
func (p *Pending) finish(err error) (Entry, bool) {
	if p == nil {
		return Entry{}, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.written || (p.discarded && err == nil) {
		return Entry{}, false
	}
	p.written = true
	e := p.e
	e.Details = maps.Clone(e.Details)
	e.Outcome = Success
	if err != nil {
		e.Outcome, e.Error = Failure, Message(err)
	}
	return e, true
}

// Message is the text an entry keeps of err, bounded.
func Message(err error) string {
	msg := err.Error()
	if len(msg) > MaxErrorBytes {
		msg = msg[:MaxErrorBytes] + "…"
	}
	return msg
}

// Writer keeps entries (store.Store).
type Writer interface {
	InsertAudit(ctx context.Context, e Entry) error
}

// Recorder begins and ends the entries of actions. A nil *Recorder records nothing.
type Recorder struct {
	W   Writer
	Now func() time.Time
	Log *slog.Logger
}

// Begin starts the entry of an action by actor on target, timed now; the returned context carries
// it to the store, which writes it in the action's transaction.
func (r *Recorder) Begin(ctx context.Context, actor Actor, action Action, target Target) (context.Context, *Pending) {
	if r == nil {
		return ctx, nil
	}
	p := &Pending{e: Entry{Time: r.Now(), Actor: actor, Action: action, Target: target}}
	return With(ctx, p), p
}

// End writes p's entry unless the action's transaction did: a failure with err's message, or a
// success of an action that had no transaction. The write outlives ctx's cancellation (a client
// that went away does not lose the record); a write that fails is logged.
func (r *Recorder) End(ctx context.Context, p *Pending, err error) {
	if r == nil {
		return
	}
	e, ok := p.finish(err)
	if !ok {
		return
	}
	r.write(ctx, e)
}

// Record writes the entry of an action that is done (or refused), in one call.
func (r *Recorder) Record(ctx context.Context, actor Actor, action Action, target Target, err error, details map[string]any) {
	if r == nil {
		return
	}
	p := &Pending{e: Entry{Time: r.Now(), Actor: actor, Action: action, Target: target, Details: details}}
	r.End(ctx, p, err)
}

func (r *Recorder) write(ctx context.Context, e Entry) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := r.W.InsertAudit(ctx, e); err != nil && r.Log != nil {
		r.Log.Error("audit entry lost", "action", e.Action, "actor", e.Actor.Name, "target", e.Target.Name, "outcome", e.Outcome, "err", err)
	}
}

// Filter selects entries, newest first.
type Filter struct {
	ActorName  string
	Action     Action
	TargetKind string
	// TargetName matches the target's name, or, for a name without '/', the name part of a
	// workspace's "owner/name".
	TargetName string
	Outcome    Outcome
	// Since and Until bound the entries' time: Since <= Time < Until (zero: unbounded).
	Since, Until time.Time
	// BeforeID pages: entries with a smaller ID (0: from the newest).
	BeforeID int64
	// Limit bounds the entries returned (1..MaxLimit).
	Limit int
}

// Paging bounds.
const (
	DefaultLimit = 100
	MaxLimit     = 1000
)

// Actions lists every action, for validation and help.
var Actions = []Action{WorkspaceCreate, WorkspaceTransition, WorkspaceDormant, WorkspaceSchedule, BuildCreate, BuildCancel, StatePush,
	AgentCreate, UserCreate, UserToken, ProvisionerCreate, TemplatePush, TemplateLifecycle, TemplateDelete, SignIn, SignInWorkspace, SSHKeyAdd, SSHKeyRemove,
	ExternalAuthLink, ExternalAuthUnlink, GitSSHRotate}

// Kinds lists every target kind.
var Kinds = []string{KindWorkspace, KindUser, KindAgent, KindTemplate, KindProvisioner, KindSSHKey, KindPreset, KindForge}

// Workspace is the target of an action on a workspace.
func Workspace(id, owner, name string) Target {
	return Target{Kind: KindWorkspace, ID: id, Name: owner + "/" + name}
}

// Pruner deletes old entries (store.Store).
type Pruner interface {
	PruneAudit(ctx context.Context, before time.Time, limit int) (int, error)
}

// Retention bounds the audit log: entries older than Keep are deleted, PruneBatch at a time and at
// most PruneBatches batches a pass, so that a pass never holds the database for long; what is left
// goes at the next pass.
type Retention struct {
	Store Pruner
	Now   func() time.Time
	// Keep is how long entries are kept; 0 keeps them forever.
	Keep time.Duration
	Log  *slog.Logger
}

// Prune bounds.
const (
	PruneBatch   = 1000
	PruneBatches = 10
)

// Prune deletes the entries older than Keep, at most PruneBatch*PruneBatches of them, and returns
// how many it deleted.
func (r Retention) Prune(ctx context.Context) (int, error) {
	if r.Keep <= 0 {
		return 0, nil
	}
	before := r.Now().Add(-r.Keep)
	total := 0
	for range PruneBatches {
		n, err := r.Store.PruneAudit(ctx, before, PruneBatch)
		total += n
		if err != nil || n < PruneBatch {
			return total, err
		}
	}
	return total, nil
}

// Run prunes at once and then every interval until ctx ends; after makes the waits (time.After).
func (r Retention) Run(ctx context.Context, interval time.Duration, after func(time.Duration) <-chan time.Time) {
	if r.Keep <= 0 {
		return
	}
	for {
		n, err := r.Prune(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			r.Log.Warn("audit retention: prune failed", "err", err)
		case n > 0:
			r.Log.Info("audit retention: pruned", "entries", n, "older_than", r.Keep)
		}
		select {
		case <-ctx.Done():
			return
		case <-after(interval):
		}
	}
}
