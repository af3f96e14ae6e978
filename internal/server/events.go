package server

import (
	"bufio"
	"encoding/json"
	"net/http"
	"time"

	"github.com/hangar-dev/hangar/internal/errs"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// The live workspace list (docs/decisions.md, "The live workspace stream"): GET
// /api/v1/workspaces/events is a stream of Server-Sent Events. It sends the workspaces the user
// may see first (event "snapshot"), then, as changes commit, the workspaces that changed (event
// "change"), read by the store's change cursor: only the rows changed, never the whole list again.
// A reconnecting client (EventSource reconnects by itself) gets a new snapshot; there is no resume
// from an event id, since a snapshot costs one list and is always right.

// HeartbeatInterval is how often the stream sends a comment when nothing changed, so that
// proxies and browsers keep an idle stream open and a dead client is noticed.
const HeartbeatInterval = 15 * time.Second

// WorkspaceEvents is the data of the stream's events: "snapshot" carries every visible workspace
// in Workspaces; "change" the workspaces created or changed since, and in Deleted those deleted
// (actual state Terminated) or no longer visible.
type WorkspaceEvents struct {
	Workspaces []sdk.Workspace `json:"workspaces"`
	Deleted    []string        `json:"deleted,omitempty"`
}

func (s *Server) workspaceEvents(w http.ResponseWriter, r *http.Request, u workspace.User) error {
	flusher, ok := w.(http.Flusher)
	if !ok {
		return errCode(errs.Internal, "this connection cannot stream", "")
	}
	f := store.ListFilter{OwnerID: u.ID}
	if u.Admin {
		f.OwnerID = ""
	}
	ctx := r.Context()
	release, err := s.openStream(w, r, "user:"+u.ID, 0)
	if err != nil {
		return err
	}
	defer release()
	// A revocation anywhere (a token revoked, a session ended, a user suspended or deleted) makes
	// the credential be checked again at once; an expiry or a change of the admin flag is seen at
	// the next heartbeat. Subscribed first, so that none committed from here on is missed.
	revoked, unsubscribeRevocations := s.store.SubscribeRevocations()
	defer unsubscribeRevocations()
	// Subscribe, then take the cursor, then list: a change committed after the list is read next.
	wake, unsubscribe := s.store.SubscribeWorkspaces()
	defer unsubscribe()
	cursor, err := s.store.WorkspaceCursor(ctx)
	if err != nil {
		return err
	}
	rows, err := s.store.ListWorkspaces(ctx, f)
	if err != nil {
		return err
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // a buffering reverse proxy (nginx) passes it on at once
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriterSize(w, 32<<10)
	send := func(event string, data WorkspaceEvents) bool {
		b, err := json.Marshal(data)
		if err != nil {
			s.log.Error("workspace events: encode", "err", err)
			return false
		}
		bw.WriteString("event: " + event + "\ndata: ")
		bw.Write(b) // JSON holds no raw newline: one data line
		bw.WriteString("\n\n")
		if err := bw.Flush(); err != nil {
			return false
		}
		flusher.Flush()
		return true
	}
	// The heartbeat's timer is armed once per interval (from before the snapshot), not again after
	// each change: a stream busy with changes still beats, and still checks its credential.
	beat := s.heartbeatAfter(HeartbeatInterval)
	// The browser's EventSource waits this long before reconnecting.
	bw.WriteString("retry: 2000\n\n")
	if !send("snapshot", WorkspaceEvents{Workspaces: s.sdkWorkspaces(r, rows)}) {
		return nil
	}
	stop := s.shutdownOf(r)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-stop:
			return nil
		case <-revoked:
			if !s.stillSignedIn(r, u) {
				return nil
			}
		case <-beat:
			beat = s.heartbeatAfter(HeartbeatInterval)
			if !s.stillSignedIn(r, u) {
				return nil
			}
			if _, err := bw.WriteString(": heartbeat\n\n"); err != nil || bw.Flush() != nil {
				return nil
			}
			flusher.Flush()
		case <-wake:
			var changed []workspace.Workspace
			changed, cursor, err = s.store.WorkspaceChanges(ctx, cursor, f)
			if err != nil {
				if ctx.Err() == nil {
					s.log.Error("workspace events: read changes", "err", err)
				}
				return nil // the client reconnects and starts from a snapshot
			}
			if len(changed) == 0 {
				continue
			}
			var ev WorkspaceEvents
			var live []workspace.Workspace
			for _, row := range changed {
				if row.ActualState == workspace.Terminated {
					ev.Deleted = append(ev.Deleted, row.ID)
					continue
				}
				live = append(live, row)
			}
			ev.Workspaces = s.sdkWorkspaces(r, live)
			if !send("change", ev) {
				return nil
			}
		}
	}
}

// stillSignedIn reports whether the request's credential (its bearer token, or else its session
// cookie) still names u, with the admin flag the stream began with (an admin's stream shows every
// workspace: one who is no longer admin must not go on seeing them); an error reading it counts as
// no.
func (s *Server) stillSignedIn(r *http.Request, u workspace.User) bool {
	got, err := s.credentialUser(r.Context(), r)
	return err == nil && got.ID == u.ID && got.Admin == u.Admin
}

// sdkWorkspaces converts rows as the list does (with what the lifecycle executor will do).
func (s *Server) sdkWorkspaces(r *http.Request, rows []workspace.Workspace) []sdk.Workspace {
	out := make([]sdk.Workspace, 0, len(rows))
	if len(rows) == 0 {
		return out
	}
	pol, ok := s.policies(r.Context())
	for _, row := range rows {
		ws := s.toWorkspace(row)
		if ok {
			s.automation(pol.Of(row), row, &ws)
		}
		out = append(out, ws)
	}
	return out
}
