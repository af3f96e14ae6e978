package sdk

import (
	"context"
	"net/http"
	"time"
)

// PresetScheduleRule sets a preset's instances while the time matches Cron (five fields, read in
// the preset's time zone).
type PresetScheduleRule struct {
	Cron      string `json:"cron"`
	Instances int    `json:"instances"`
}

// PutPresetRequest is the body of PUT /api/v1/templates/{name}/presets/{preset}: the whole preset.
type PutPresetRequest struct {
	// Version pins a template version by number; 0 or absent follows the template's active one.
	Version int `json:"version,omitempty"`
	// Parameters are passed to the module's builds (variables it declares).
	Parameters map[string]string `json:"parameters,omitempty"`
	// Instances is how many prebuilt workspaces are kept ready (0 to 100).
	Instances int                  `json:"instances"`
	Schedule  []PresetScheduleRule `json:"schedule,omitempty"`
	// Timezone is the IANA zone of the schedule ("" is UTC).
	Timezone string `json:"timezone,omitempty"`
}

// Preset is a template's named pool of prebuilt workspaces, with the pool as it is now.
type Preset struct {
	Name     string `json:"name"`
	Template string `json:"template"`
	// Version is the pinned version number; 0 follows the template's active one.
	Version    int                  `json:"version"`
	Parameters map[string]string    `json:"parameters"`
	Instances  int                  `json:"instances"`
	Schedule   []PresetScheduleRule `json:"schedule"`
	Timezone   string               `json:"timezone"`
	CreatedBy  string               `json:"created_by"`
	CreatedAt  time.Time            `json:"created_at"`
	UpdatedAt  time.Time            `json:"updated_at"`
	Pool       PresetPool           `json:"pool"`
}

// PresetPool is a preset's pool now: how many it wants (the schedule's, or Instances), how many are
// ready to be claimed and how many are being built, on the version the pool runs.
type PresetPool struct {
	Version  int `json:"version"`
	Desired  int `json:"desired"`
	Ready    int `json:"ready"`
	Building int `json:"building"`
	// Other counts the unclaimed prebuilt workspaces on their way out (outdated, failed, extra,
	// being deleted).
	Other        int        `json:"other"`
	ReconciledAt *time.Time `json:"reconciled_at"`
	// Failures counts the prebuild creates that failed in a row since the last that succeeded
	// (bounded: the backoff reads no more); LastError and LastFailureAt are the latest's.
	Failures      int        `json:"failures"`
	LastError     string     `json:"last_error,omitempty"`
	LastFailureAt *time.Time `json:"last_failure_at,omitempty"`
}

// PutPreset creates or replaces a template's preset (admins).
func (c *Client) PutPreset(ctx context.Context, template, preset string, req PutPresetRequest) (Preset, error) {
	var out Preset
	err := c.do(ctx, http.MethodPut, []string{"templates", template, "presets", preset}, req, &out)
	return out, err
}

// ListPresets lists a template's presets with their pools.
func (c *Client) ListPresets(ctx context.Context, template string) ([]Preset, error) {
	var out []Preset
	err := c.do(ctx, http.MethodGet, []string{"templates", template, "presets"}, nil, &out)
	return out, err
}

// DeleteTemplate deletes a template (admins): refused (409, naming them) while workspaces that
// are not deleted or presets use it.
func (c *Client) DeleteTemplate(ctx context.Context, template string) error {
	return c.do(ctx, http.MethodDelete, []string{"templates", template}, nil, nil)
}

// DeletePreset deletes a template's preset (admins); the reconciler deletes its unclaimed
// prebuilt workspaces.
func (c *Client) DeletePreset(ctx context.Context, template, preset string) error {
	return c.do(ctx, http.MethodDelete, []string{"templates", template, "presets", preset}, nil, nil)
}
