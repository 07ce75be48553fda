package model

import (
	"context"
	"time"
)

// Plugin is one uploaded version of a plugin.
type Plugin struct {
	TenantID   string        `json:"-"`
	Name       string        `json:"name"`
	Version    int           `json:"version"`
	Runtime    string        `json:"runtime"`
	Timeout    time.Duration `json:"-"`
	TimeoutStr string        `json:"timeout"`
	SHA256     string        `json:"sha256"`
	Size       int64         `json:"size"`
	UploadedBy string        `json:"uploaded_by"`
	// Network is NetworkOn or NetworkOff: an "off" version runs in a network namespace of its own, with no
	// interface up.
	Network   string    `json:"network"`
	CreatedAt time.Time `json:"created_at"`
}

// Network settings of a plugin version.
const (
	NetworkOn  = "on"
	NetworkOff = "off"
)

// RunFilter selects plugin runs for GET /plugins/{name}/runs.
type RunFilter struct {
	TenantID   string
	Plugin     string
	Day        time.Time // zero = any day
	InstanceID string
	Page       Page
}

// PluginStore keeps plugins and their runs.
type PluginStore interface {
	// NextPluginVersion returns the number the next upload of name gets.
	NextPluginVersion(ctx context.Context, tenant, name string) (int, error)
	// CreatePlugin stores an uploaded version; ECONFLICT when the version exists (a concurrent upload).
	CreatePlugin(ctx context.Context, p *Plugin) error
	// GetPlugin returns a version (0 = latest). ENOTFOUND when missing.
	GetPlugin(ctx context.Context, tenant, name string, version int) (*Plugin, error)
	ListPluginVersions(ctx context.Context, tenant, name string) ([]*Plugin, error)
	// ListPlugins returns the latest version of every plugin.
	ListPlugins(ctx context.Context, tenant string) ([]*Plugin, error)
	GetRun(ctx context.Context, tenant, id string) (*PluginRun, error)
	ListRuns(ctx context.Context, f RunFilter) ([]*PluginRun, string, error)
	// ClaimRuns leases up to n queued runs (or running runs whose lease expired) to worker.
	ClaimRuns(ctx context.Context, worker string, n int, now, leaseUntil time.Time) ([]*PluginRun, error)
	ExtendRuns(ctx context.Context, worker string, ids []string, leaseUntil time.Time) error
	// CreatePluginRun queues a run outside an instance's transaction (plugin subscriptions to events).
	CreatePluginRun(ctx context.Context, r *PluginRun) error
	// FinishRunOnly records a run result without touching an instance (its instance is gone or ended).
	FinishRunOnly(ctx context.Context, r *PluginRun) error
}
