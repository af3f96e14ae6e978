package sdk

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// AuditEntry is one entry of the audit log (GET /api/v1/audit).
type AuditEntry struct {
	ID   int64     `json:"id"`
	Time time.Time `json:"time"`
	// Actor is the username of who acted ("hangar-automation" for the lifecycle executor; "" for
	// an unknown caller, such as a failed sign-in); ActorID its user id.
	Actor   string `json:"actor"`
	ActorID string `json:"actor_id,omitempty"`
	Action  string `json:"action"`
	// TargetKind is workspace, user, agent, template, provisioner, ssh_key or preset; TargetName what a
	// person calls it (a workspace's "owner/name").
	TargetKind string `json:"target_kind,omitempty"`
	TargetID   string `json:"target_id,omitempty"`
	TargetName string `json:"target_name,omitempty"`
	// Outcome is success or failure; Error the failure's message.
	Outcome string         `json:"outcome"`
	Error   string         `json:"error,omitempty"`
	Details map[string]any `json:"details,omitempty"`
}

// AuditPage is a page of the audit log, newest first. NextBeforeID, when not 0, is the before_id
// of the next (older) page.
type AuditPage struct {
	Entries      []AuditEntry `json:"entries"`
	NextBeforeID int64        `json:"next_before_id,omitempty"`
}

// AuditQuery is the query of GET /api/v1/audit; zero values do not filter.
type AuditQuery struct {
	Actor      string
	Action     string
	TargetKind string
	Target     string
	Outcome    string
	// Since and Until are RFC 3339 times, or (Since only) a duration back from now ("24h").
	Since, Until string
	BeforeID     int64
	Limit        int
}

// Values encodes the query.
func (q AuditQuery) Values() url.Values {
	v := url.Values{}
	for k, s := range map[string]string{"actor": q.Actor, "action": q.Action, "target_kind": q.TargetKind, "target": q.Target,
		"outcome": q.Outcome, "since": q.Since, "until": q.Until} {
		if s != "" {
			v.Set(k, s)
		}
	}
	if q.BeforeID > 0 {
		v.Set("before_id", strconv.FormatInt(q.BeforeID, 10))
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	return v
}

// ListAudit reads a page of the audit log (admins only).
func (c *Client) ListAudit(ctx context.Context, q AuditQuery) (AuditPage, error) {
	var p AuditPage
	err := c.doQuery(ctx, http.MethodGet, []string{"audit"}, q.Values(), nil, &p)
	return p, err
}
