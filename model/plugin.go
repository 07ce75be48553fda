package model

import (
	"context"
	"io"
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
	Network string `json:"network"`
	// Warm is true when the python runs of this version are forked from the warm runtime (the default), false
	// when each spawns a fresh interpreter (the upload option warm=false). Binaries always spawn.
	Warm      bool      `json:"warm"`
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
	// CreatePlugin stores an uploaded version and its file (p.Size bytes with SHA-256 p.SHA256) in one
	// transaction, where every replica can fetch the file; ECONFLICT when the version exists (a concurrent upload).
	CreatePlugin(ctx context.Context, p *Plugin, file io.ReadSeeker) error
	// GetPlugin returns a version (0 = latest). ENOTFOUND when missing.
	GetPlugin(ctx context.Context, tenant, name string, version int) (*Plugin, error)
	ListPluginVersions(ctx context.Context, tenant, name string) ([]*Plugin, error)
	// ListPlugins returns the latest version of every plugin.
	ListPlugins(ctx context.Context, tenant string) ([]*Plugin, error)
	GetRun(ctx context.Context, tenant, id string) (*PluginRun, error)
	ListRuns(ctx context.Context, f RunFilter) ([]*PluginRun, string, error)
	// ClaimRuns leases up to n queued runs (or running runs whose lease expired) to worker.
	ClaimRuns(ctx context.Context, worker string, n int, now, leaseUntil time.Time) ([]*PluginRun, error)
	// ExtendRuns renews the leases of the runs among ids that worker still holds (running, leased to it) and
	// returns the others, each with its status now: closed by the engine (timed_out, cancelled), finished, running
	// under another worker's lease (claimed again after this one's expired), or "" when the run is gone. The
	// worker stops those (plugin.Queue.Extend).
	ExtendRuns(ctx context.Context, worker string, ids []string, leaseUntil time.Time) (lost map[string]string, err error)
	// CreatePluginRun queues a run outside an instance's transaction (plugin subscriptions to events).
	CreatePluginRun(ctx context.Context, r *PluginRun) error
	// FinishRunOnly records a run result without touching an instance (its instance is gone or ended).
	FinishRunOnly(ctx context.Context, r *PluginRun) error
	// AppendRunLog stores the log record of one attempt of a run (once: a second record of the same attempt is
	// ignored).
	AppendRunLog(ctx context.Context, l *PluginRunLog) error
	// RunLogs returns the log records of a run, by attempt. ENOTFOUND when there is none.
	RunLogs(ctx context.Context, tenant, runID string) ([]*PluginRunLog, error)
}

// PluginRunLog is the log of one attempt of a plugin run: what ran, when, how it ended, and its output. Kept in
// the database, so any replica shows the log of a run another replica executed; purged after
// HALLEY_RETENTION_DAYS.
type PluginRunLog struct {
	RunID      string    `json:"run_id"`
	Attempt    int       `json:"attempt"`
	TenantID   string    `json:"-"`
	Plugin     string    `json:"plugin"`
	InstanceID string    `json:"instance_id"`
	Record     string    `json:"record"`
	CreatedAt  time.Time `json:"created_at"`
}
