package server

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/hangar-dev/hangar/internal/audit"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// The audit log: recording the actions of the API (audit.go in package audit says how), and
// GET /api/v1/audit.

// audit begins the entry of the action the request *r makes, and points *r at the context that
// carries it, so that the store writes it in the action's transaction; the function it returns
// ends it with the handler's error. A handler records its action with one line, after decoding
// its body:
//
//	defer s.audit(&r, u, audit.TemplatePush, audit.Target{Kind: audit.KindTemplate, Name: name})(&err)
//
// (err being the handler's named result). Code under the handler that learns more adds it to the
// pending entry: audit.From(ctx).Set("build_number", n), audit.From(ctx).SetTarget(...).
func (s *Server) audit(r **http.Request, u workspace.User, action audit.Action, target audit.Target) func(*error) {
	ctx, p := s.auditor.Begin((*r).Context(), actorOf(u), action, target)
	*r = (*r).WithContext(ctx)
	return func(err *error) { s.auditor.End(ctx, p, auditErr(*err)) }
}

func actorOf(u workspace.User) audit.Actor { return audit.Actor{ID: u.ID, Name: u.Username} }

// auditErr is the error an entry keeps: the answer's message, detail and validations, as the
// caller saw them (a 500's real cause: the audit log is for admins).
func auditErr(err error) error {
	if err == nil {
		return nil
	}
	status, body := statusOf(err)
	if status >= 500 {
		return err
	}
	return errors.New((&sdk.APIError{StatusCode: status, Body: body}).Error())
}

// workspaceTarget is the workspace the {name} path value names, as "owner/name" (the caller's own
// when it names no owner); the action fills in its id once it has read it.
func workspaceTarget(r *http.Request, u workspace.User) audit.Target {
	name := r.PathValue("name")
	if !strings.Contains(name, "/") {
		name = u.Username + "/" + name
	}
	return audit.Target{Kind: audit.KindWorkspace, Name: name}
}

// listAudit is GET /api/v1/audit (admins).
func (s *Server) listAudit(w http.ResponseWriter, r *http.Request, _ workspace.User) error {
	f, err := parseAuditQuery(r.URL.Query(), s.clock.Now())
	if err != nil {
		return err
	}
	es, err := s.store.ListAudit(r.Context(), f)
	if err != nil {
		return err
	}
	out := sdk.AuditPage{Entries: make([]sdk.AuditEntry, 0, len(es))}
	for _, e := range es {
		out.Entries = append(out.Entries, toAuditEntry(e))
	}
	if len(es) == f.Limit && len(es) > 0 {
		out.NextBeforeID = es[len(es)-1].ID
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func toAuditEntry(e audit.Entry) sdk.AuditEntry {
	return sdk.AuditEntry{ID: e.ID, Time: e.Time, Actor: e.Actor.Name, ActorID: e.Actor.ID, Action: string(e.Action),
		TargetKind: e.Target.Kind, TargetID: e.Target.ID, TargetName: e.Target.Name, Outcome: string(e.Outcome), Error: e.Error, Details: e.Details}
}

var actionPattern = regexp.MustCompile(`^[a-z_]+(\.[a-z_]+)*$`)

// auditParams are the parameters GET /api/v1/audit takes.
var auditParams = []string{"actor", "action", "target_kind", "target", "outcome", "since", "until", "before_id", "limit"}

// maxAuditText bounds the text parameters (names).
const maxAuditText = 256

// parseAuditQuery reads the query of GET /api/v1/audit into a filter, at now (since and until
// take an RFC 3339 time or a duration back from now). Every problem is a validation naming its
// parameter; the limit is audit.DefaultLimit when absent.
func parseAuditQuery(q url.Values, now time.Time) (audit.Filter, error) {
	f := audit.Filter{Limit: audit.DefaultLimit}
	var vs []sdk.Validation
	bad := func(field, format string, args ...any) {
		vs = append(vs, sdk.Validation{Field: field, Detail: fmt.Sprintf(format, args...)})
	}
	keys := make([]string, 0, len(q))
	for k := range q {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if !slices.Contains(auditParams, k) {
			bad(clip(k), "unknown parameter (the parameters are %s)", strings.Join(auditParams, ", "))
		} else if len(q[k]) > 1 {
			bad(k, "is given %d times; give it once", len(q[k]))
		}
	}
	text := func(name string) string {
		v := q.Get(name)
		switch {
		case len(v) > maxAuditText:
			bad(name, "is %d bytes, the limit is %d", len(v), maxAuditText)
			return ""
		case strings.IndexFunc(v, func(r rune) bool { return unicode.IsControl(r) || r == unicode.ReplacementChar }) >= 0:
			bad(name, "must not contain control characters or invalid UTF-8")
			return ""
		}
		return v
	}
	f.ActorName = text("actor")
	f.TargetName = text("target")
	if v := q.Get("action"); v != "" {
		if len(v) > 64 || !actionPattern.MatchString(v) {
			bad("action", "must be an action name such as %q (lower-case words joined by '.'), got %q", audit.WorkspaceTransition, clip(v))
		} else {
			f.Action = audit.Action(v)
		}
	}
	if v := q.Get("target_kind"); v != "" {
		if !slices.Contains(audit.Kinds, v) {
			bad("target_kind", "must be one of %s, got %q", strings.Join(audit.Kinds, ", "), clip(v))
		} else {
			f.TargetKind = v
		}
	}
	switch v := q.Get("outcome"); v {
	case "":
	case string(audit.Success), string(audit.Failure):
		f.Outcome = audit.Outcome(v)
	default:
		bad("outcome", "must be success or failure, got %q", clip(v))
	}
	var err error
	if f.Since, err = auditTime(q.Get("since"), now); err != nil {
		bad("since", "%v", err)
	}
	if f.Until, err = auditTime(q.Get("until"), now); err != nil {
		bad("until", "%v", err)
	}
	if !f.Since.IsZero() && !f.Until.IsZero() && !f.Since.Before(f.Until) {
		bad("until", "must be after since")
	}
	if v := q.Get("before_id"); v != "" {
		if f.BeforeID, err = strconv.ParseInt(v, 10, 64); err != nil || f.BeforeID < 1 {
			f.BeforeID = 0
			bad("before_id", "must be an entry id (1, 2, ...), got %q", clip(v))
		}
	}
	if v := q.Get("limit"); v != "" {
		if f.Limit, err = strconv.Atoi(v); err != nil || f.Limit < 1 || f.Limit > audit.MaxLimit {
			f.Limit = audit.DefaultLimit
			bad("limit", "must be a whole number from 1 to %d, got %q", audit.MaxLimit, clip(v))
		}
	}
	if len(vs) > 0 {
		return f, errBadRequest("invalid request", vs...)
	}
	return f, nil
}

// auditTime reads an RFC 3339 time, or a duration back from now ("24h"); "" is no bound.
func auditTime(v string, now time.Time) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t.UTC(), nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 || d > 100*365*24*time.Hour {
		return time.Time{}, fmt.Errorf("must be an RFC 3339 time (2026-01-02T15:04:05Z) or a positive duration back from now (24h), got %q", clip(v))
	}
	return now.Add(-d), nil
}

// clip shortens outside input quoted in an answer.
func clip(s string) string {
	const n = 80
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}
