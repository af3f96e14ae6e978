package sdk

import (
	"context"
	"net/http"
	"time"
)

// WorkspaceSchedule is a workspace's own lifecycle settings (PUT /api/v1/workspaces/{name}/schedule).
type WorkspaceSchedule struct {
	// Autostart is a cron expression (minute hour day-of-month month day-of-week, or @daily...) at
	// which the stopped workspace is started; "" is none. Timezone is its IANA zone ("" is UTC).
	Autostart string `json:"autostart"`
	Timezone  string `json:"timezone"`
	// TTL is the autostop TTL: the workspace is stopped this long after its start or its last use,
	// whichever is later ("8h"; "0" turns autostop off where the policy allows). null or absent
	// takes the policy's default.
	TTL *string `json:"ttl"`
}

// Lifecycle is a template's or agent's lifecycle policy; durations are Go duration text ("8h",
// "720h"), and "0" or absent turns a rule off.
type Lifecycle struct {
	DefaultTTL         string `json:"default_ttl,omitempty"`
	MaxTTL             string `json:"max_ttl,omitempty"`
	FailureTTL         string `json:"failure_ttl,omitempty"`
	DormancyThreshold  string `json:"dormancy_threshold,omitempty"`
	DormancyAutoDelete string `json:"dormancy_auto_delete,omitempty"`
	MaxActive          string `json:"max_active,omitempty"`
	MaxStopped         string `json:"max_stopped,omitempty"`
	// Activity is what counts as use: "connections" ("" too) or "work" (what the workspace's
	// helper sees: CPU at or over ActivityCPU cores, a running process ActivityProcesses names,
	// terminal output, web editor connections).
	Activity          string   `json:"activity,omitempty"`
	ActivityProcesses []string `json:"activity_processes,omitempty"`
	ActivityCPU       float64  `json:"activity_cpu,omitempty"`
}

// WorkspaceAutomation is what the lifecycle executor has done and will do to a workspace.
type WorkspaceAutomation struct {
	// Policy is the lifecycle policy in force: its template's (Terraform) or agent's (Kubernetes).
	Policy Lifecycle `json:"policy"`
	// TTL is the autostop TTL in force ("" when none).
	TTL string `json:"ttl,omitempty"`
	// AutostopAt is when a running workspace will be stopped unless used before; NextAutostartAt
	// when a stopped one will be started.
	AutostopAt      *time.Time `json:"autostop_at,omitempty"`
	NextAutostartAt *time.Time `json:"next_autostart_at,omitempty"`
}

// SetSchedule replaces a workspace's own lifecycle settings.
func (c *Client) SetSchedule(ctx context.Context, workspace string, s WorkspaceSchedule) (Workspace, error) {
	var w Workspace
	err := c.do(ctx, http.MethodPut, []string{"workspaces", workspace, "schedule"}, s, &w)
	return w, err
}

// SetTemplateLifecycle replaces a template's lifecycle policy (admins).
func (c *Client) SetTemplateLifecycle(ctx context.Context, template string, l Lifecycle) (Template, error) {
	var t Template
	err := c.do(ctx, http.MethodPut, []string{"templates", template, "lifecycle"}, l, &t)
	return t, err
}
