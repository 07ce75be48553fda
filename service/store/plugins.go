package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/halley-bpm/halley/model"
)

type pluginRow struct {
	TenantID   string `gorm:"primaryKey"`
	Name       string `gorm:"primaryKey"`
	Version    int    `gorm:"primaryKey"`
	Runtime    string
	TimeoutMs  int64
	Sha256     string `gorm:"column:sha256"`
	Size       int64
	UploadedBy string
	Network    string
	Warm       bool
	CreatedAt  time.Time
}

func (pluginRow) TableName() string { return "plugins" }

func (r *pluginRow) toModel() *model.Plugin {
	d := time.Duration(r.TimeoutMs) * time.Millisecond
	return &model.Plugin{TenantID: r.TenantID, Name: r.Name, Version: r.Version, Runtime: r.Runtime, Timeout: d, TimeoutStr: d.String(),
		SHA256: r.Sha256, Size: r.Size, UploadedBy: r.UploadedBy, Network: r.Network, Warm: r.Warm, CreatedAt: r.CreatedAt.UTC()}
}

func (r *pluginRunRow) toModel() *model.PluginRun {
	run := &model.PluginRun{ID: r.ID, TenantID: r.TenantID, Plugin: r.Plugin, Version: r.Version, InstanceID: r.InstanceID, NodeID: r.NodeID,
		NodeInstanceID: r.NodeInstanceID, Phase: r.Phase, Status: r.Status, Attempt: r.Attempt, ExitCode: r.ExitCode, Input: json.RawMessage(r.Input),
		Error: r.Error, Stdout: r.Stdout, Stderr: r.Stderr, CreatedAt: r.CreatedAt.UTC(), StartedAt: utcPtr(r.StartedAt), EndedAt: utcPtr(r.EndedAt),
		DurationMS: r.DurationMs, LeaseOwner: r.LeaseOwner, LeaseUntil: utcPtr(r.LeaseUntil)}
	if r.Output != "" {
		run.Output = json.RawMessage(r.Output)
	}
	return run
}

var _ model.PluginStore = (*Store)(nil)

// NextPluginVersion returns max(version)+1 for the name.
func (s *Store) NextPluginVersion(ctx context.Context, tenant, name string) (int, error) {
	var v *int
	if err := s.db.WithContext(ctx).Model(&pluginRow{}).Where("tenant_id = ? AND name = ?", tenant, name).Select("MAX(version)").Scan(&v).Error; err != nil {
		return 0, fmt.Errorf("store: unable to read plugin versions: %w", err)
	}
	if v == nil {
		return 1, nil
	}
	return *v + 1, nil
}

// CreatePlugin stores an uploaded version and its file in one transaction: the file (p.Size bytes with SHA-256
// p.SHA256, read from file) goes into the blob tables unless the same bytes are stored already, so every replica
// can fetch it. ECONFLICT when the version exists (a concurrent upload); nothing is stored then, nor when the
// file does not match p.Size and p.SHA256.
func (s *Store) CreatePlugin(ctx context.Context, p *model.Plugin, file io.ReadSeeker) error {
	p.CreatedAt = s.now()
	row := pluginRow{TenantID: p.TenantID, Name: p.Name, Version: p.Version, Runtime: p.Runtime, TimeoutMs: p.Timeout.Milliseconds(), Sha256: p.SHA256,
		Size: p.Size, UploadedBy: p.UploadedBy, Network: p.Network, Warm: p.Warm, CreatedAt: p.CreatedAt}
	if row.Network == "" {
		row.Network, p.Network = model.NetworkOn, model.NetworkOn
	}
	err := s.storeWithBlob(ctx, file, func(tx *gorm.DB) error {
		// The version row first: a concurrent upload of the same name fails here before storing its chunks.
		if err := tx.Create(&row).Error; err != nil {
			if isDuplicate(err) {
				return model.CodedError(model.ECONFLICT, "concurrent_upload", "version %d of plugin %q was just uploaded by someone else; upload again", p.Version, p.Name)
			}
			return fmt.Errorf("store: unable to create plugin %s: %w", p.Name, err)
		}
		if err := s.putBlob(tx, p.SHA256, p.Size, file); err != nil {
			return err
		}
		return s.auditIn(ctx, tx, nil, nil)
	})
	return err
}

// GetPlugin returns a version, 0 = the latest. ENOTFOUND when missing.
func (s *Store) GetPlugin(ctx context.Context, tenant, name string, version int) (*model.Plugin, error) {
	// On database/sql with prebuilt SQL: every queued plugin run asks (see sqlbatch.go).
	const cols = "SELECT tenant_id, name, version, runtime, timeout_ms, sha256, size, uploaded_by, network, warm, created_at FROM plugins WHERE tenant_id = ? AND name = ?"
	var r pluginRow
	var err error
	if version > 0 {
		err = s.sqlDB.QueryRowContext(ctx, cols+" AND version = ?", tenant, name, version).
			Scan(&r.TenantID, &r.Name, &r.Version, &r.Runtime, &r.TimeoutMs, &r.Sha256, &r.Size, &r.UploadedBy, &r.Network, &r.Warm, &r.CreatedAt)
	} else {
		err = s.sqlDB.QueryRowContext(ctx, cols+" ORDER BY version DESC LIMIT 1", tenant, name).
			Scan(&r.TenantID, &r.Name, &r.Version, &r.Runtime, &r.TimeoutMs, &r.Sha256, &r.Size, &r.UploadedBy, &r.Network, &r.Warm, &r.CreatedAt)
	}
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("store: unable to read plugin %s: %w", name, err)
	}
	if errors.Is(err, sql.ErrNoRows) {
		if version > 0 {
			return nil, model.CodedError(model.ENOTFOUND, "plugin_not_found", "plugin %s has no version %d", name, version)
		}
		return nil, model.CodedError(model.ENOTFOUND, "plugin_not_found", "plugin %q not found", name)
	}
	return r.toModel(), nil
}

// ListPluginVersions lists a plugin's versions, newest first.
func (s *Store) ListPluginVersions(ctx context.Context, tenant, name string) ([]*model.Plugin, error) {
	var rows []pluginRow
	if err := s.db.WithContext(ctx).Where("tenant_id = ? AND name = ?", tenant, name).Order("version DESC").Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("store: unable to list plugin versions: %w", err)
	}
	out := make([]*model.Plugin, len(rows))
	for i := range rows {
		out[i] = rows[i].toModel()
	}
	return out, nil
}

// ListPlugins returns the latest version of every plugin, by name.
func (s *Store) ListPlugins(ctx context.Context, tenant string) ([]*model.Plugin, error) {
	var rows []pluginRow
	err := s.db.WithContext(ctx).Where("tenant_id = ? AND version = (SELECT MAX(p2.version) FROM plugins p2 WHERE p2.tenant_id = plugins.tenant_id AND p2.name = plugins.name)", tenant).
		Order("name").Find(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("store: unable to list plugins: %w", err)
	}
	out := make([]*model.Plugin, len(rows))
	for i := range rows {
		out[i] = rows[i].toModel()
	}
	return out, nil
}

// GetRun returns a plugin run. ENOTFOUND when missing.
func (s *Store) GetRun(ctx context.Context, tenant, id string) (*model.PluginRun, error) {
	var r pluginRunRow
	if err := s.db.WithContext(ctx).Where("id = ? AND tenant_id = ?", id, tenant).Take(&r).Error; err != nil {
		return nil, notFound(err, "plugin run %q not found", id)
	}
	return r.toModel(), nil
}

// ListRuns lists a plugin's runs newest first (by creation), filtered by UTC day and instance.
func (s *Store) ListRuns(ctx context.Context, f model.RunFilter) ([]*model.PluginRun, string, error) {
	q := s.db.WithContext(ctx).Omit("input").Where("tenant_id = ? AND plugin = ?", f.TenantID, f.Plugin)
	if !f.Day.IsZero() {
		d := f.Day.UTC().Truncate(24 * time.Hour)
		q = q.Where("created_at >= ? AND created_at < ?", d, d.Add(24*time.Hour))
	}
	if f.InstanceID != "" {
		q = q.Where("instance_id = ?", f.InstanceID)
	}
	if f.Page.Cursor != "" {
		at, id, err := decodeCursor(f.Page.Cursor)
		if err != nil {
			return nil, "", err
		}
		q = q.Where("(created_at < ? OR (created_at = ? AND id < ?))", at, at, id)
	}
	var rows []pluginRunRow
	if err := q.Order("created_at DESC, id DESC").Limit(f.Page.Limit + 1).Find(&rows).Error; err != nil {
		return nil, "", fmt.Errorf("store: unable to list plugin runs: %w", err)
	}
	next := ""
	if len(rows) > f.Page.Limit {
		rows = rows[:f.Page.Limit]
		next = encodeCursor(rows[len(rows)-1].CreatedAt, rows[len(rows)-1].ID)
	}
	out := make([]*model.PluginRun, len(rows))
	for i := range rows {
		out[i] = rows[i].toModel()
	}
	return out, next, nil
}

// ClaimRuns leases queued runs, and running runs whose lease expired (their worker died), to worker. On MySQL
// rows other workers are claiming are skipped (FOR UPDATE SKIP LOCKED).
func (s *Store) ClaimRuns(ctx context.Context, worker string, n int, now, leaseUntil time.Time) ([]*model.PluginRun, error) {
	var out []*model.PluginRun
	err := s.inTxOpts(ctx, readCommitted, func(tx *gorm.DB) error {
		out = nil
		q := tx.Where("status = ? OR (status = ? AND lease_until < ?)", model.RunQueued, model.RunRunning, now.UTC()).Order("created_at, id").Limit(n)
		if s.dialect == MySQL {
			q = q.Clauses(clause.Locking{Strength: "UPDATE", Options: "SKIP LOCKED"})
		}
		var rows []pluginRunRow
		if err := q.Find(&rows).Error; err != nil {
			return fmt.Errorf("store: unable to claim plugin runs: %w", err)
		}
		for i := range rows {
			r := &rows[i]
			if r.Status == model.RunRunning {
				r.Attempt++ // rescued from a dead worker
			}
			r.Status, r.LeaseOwner = model.RunRunning, worker
			// The lease runs from now or from the run's creation, whichever is later: a claim whose transaction ran
			// late (a lock wait, a stalled database, a clock that moved meanwhile) must not lease a newer run until
			// a time already past — the next claim would take it again while it still executes.
			lu := leaseUntil.UTC()
			if created := r.CreatedAt.UTC(); created.After(now) {
				lu = lu.Add(created.Sub(now))
			}
			r.LeaseUntil = &lu
			st := now.UTC()
			r.StartedAt = &st
			if err := tx.Model(&pluginRunRow{}).Where("id = ?", r.ID).Updates(map[string]any{"status": r.Status, "lease_owner": worker,
				"lease_until": lu, "attempt": r.Attempt, "started_at": st}).Error; err != nil {
				return fmt.Errorf("store: unable to lease plugin run %s: %w", r.ID, err)
			}
			out = append(out, r.toModel())
		}
		return nil
	})
	return out, err
}

// ExtendRuns renews the leases of runs the worker still executes, and returns the runs among ids it no longer
// holds with their status now ("" when the row is gone): the engine closed them (timed_out, cancelled), they
// finished, or another worker claimed them after this one's lease expired.
func (s *Store) ExtendRuns(ctx context.Context, worker string, ids []string, leaseUntil time.Time) (map[string]string, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	db := s.db.WithContext(ctx)
	res := db.Model(&pluginRunRow{}).Where("id IN ? AND lease_owner = ? AND status = ?", ids, worker, model.RunRunning).
		Update("lease_until", leaseUntil.UTC())
	if res.Error != nil {
		return nil, fmt.Errorf("store: unable to extend plugin run leases: %w", res.Error)
	}
	if int(res.RowsAffected) == len(ids) {
		return nil, nil // every one renewed (MySQL counts changed rows only: a lease renewed to the same time reads below)
	}
	var held []pluginRunRow
	if err := db.Select("id", "status", "lease_owner").Where("id IN ?", ids).Find(&held).Error; err != nil {
		return nil, fmt.Errorf("store: unable to read plugin run leases: %w", err)
	}
	lost := make(map[string]string, len(ids))
	for _, id := range ids {
		lost[id] = "" // gone, unless read below
	}
	for _, r := range held {
		if r.Status == model.RunRunning && r.LeaseOwner == worker {
			delete(lost, r.ID)
			continue
		}
		lost[r.ID] = r.Status
	}
	if len(lost) == 0 {
		return nil, nil
	}
	return lost, nil
}

// CreatePluginRun queues a run that belongs to no instance step.
func (s *Store) CreatePluginRun(ctx context.Context, r *model.PluginRun) error {
	row := pluginRunRow{ID: r.ID, TenantID: r.TenantID, Plugin: r.Plugin, Version: r.Version, InstanceID: r.InstanceID, NodeID: r.NodeID,
		NodeInstanceID: r.NodeInstanceID, Phase: r.Phase, Status: model.RunQueued, Attempt: 1, Input: string(r.Input), CreatedAt: s.now()}
	if err := s.db.WithContext(ctx).Create(&row).Error; err != nil {
		return fmt.Errorf("store: unable to queue plugin run %s: %w", r.ID, err)
	}
	return nil
}

// FinishRunOnly records a run result when no instance is to be changed.
func (s *Store) FinishRunOnly(ctx context.Context, r *model.PluginRun) error {
	return s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		return applyRunUpdate(tx, model.RunUpdate{Run: r, From: []string{model.RunQueued, model.RunRunning, model.RunWaiting}})
	})
}

const runUpdateSQL = "UPDATE plugin_runs SET status = ?, exit_code = ?, output = ?, error = ?, stdout = ?, stderr = ?, started_at = ?, " +
	"ended_at = ?, duration_ms = ?, lease_until = NULL WHERE id = ? AND status IN "

const runCloseSQL = "UPDATE plugin_runs SET status = ?, error = ?, ended_at = ?, lease_until = NULL WHERE id = ? AND status IN "

// applyRunUpdateRaw is applyRunUpdate on database/sql with prebuilt SQL (the step's hot path).
func applyRunUpdateRaw(ctx context.Context, c conn, u model.RunUpdate) error {
	r := u.Run
	if u.Close {
		q, args := runCloseStmt(u)
		if _, err := c.ExecContext(ctx, q, args...); err != nil {
			return fmt.Errorf("store: unable to close plugin run %s: %w", r.ID, err)
		}
		return nil
	}
	out := ""
	if len(r.Output) > 0 {
		out = string(r.Output)
	}
	args := []any{r.Status, r.ExitCode, out, r.Error, r.Stdout, r.Stderr, utcPtr(r.StartedAt), utcPtr(r.EndedAt), r.DurationMS, r.ID}
	res, err := c.ExecContext(ctx, runUpdateSQL+"("+placeholders(len(u.From))+")", append(args, strArgs(u.From)...)...)
	if err != nil {
		return fmt.Errorf("store: unable to record plugin run %s: %w", r.ID, err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return model.CodedError(model.ECONFLICT, "run_finished", "plugin run %s is already finished", r.ID)
	}
	return nil
}

// runCloseStmt closes a run by the engine (timed out, cancelled): what the run printed stays; a run already finished
// is left as it is.
func runCloseStmt(u model.RunUpdate) (string, []any) {
	r := u.Run
	args := []any{r.Status, r.Error, utcPtr(r.EndedAt), r.ID}
	return runCloseSQL + "(" + placeholders(len(u.From)) + ")", append(args, strArgs(u.From)...)
}

// applyRunUpdate writes a run's result if it is still in one of the From statuses; ECONFLICT otherwise.
func applyRunUpdate(tx *gorm.DB, u model.RunUpdate) error {
	r := u.Run
	if u.Close {
		res := tx.Model(&pluginRunRow{}).Where("id = ? AND status IN ?", r.ID, u.From).Updates(map[string]any{
			"status": r.Status, "error": r.Error, "ended_at": r.EndedAt, "lease_until": nil})
		if res.Error != nil {
			return fmt.Errorf("store: unable to close plugin run %s: %w", r.ID, res.Error)
		}
		return nil
	}
	out := ""
	if len(r.Output) > 0 {
		out = string(r.Output)
	}
	res := tx.Model(&pluginRunRow{}).Where("id = ? AND status IN ?", r.ID, u.From).Updates(map[string]any{
		"status": r.Status, "exit_code": r.ExitCode, "output": out, "error": r.Error, "stdout": r.Stdout, "stderr": r.Stderr,
		"started_at": r.StartedAt, "ended_at": r.EndedAt, "duration_ms": r.DurationMS, "lease_until": nil})
	if res.Error != nil {
		return fmt.Errorf("store: unable to record plugin run %s: %w", r.ID, res.Error)
	}
	if res.RowsAffected != 1 {
		return model.CodedError(model.ECONFLICT, "run_finished", "plugin run %s is already finished", r.ID)
	}
	return nil
}

type runLogRow struct {
	RunID      string `gorm:"primaryKey"`
	Attempt    int    `gorm:"primaryKey"`
	TenantID   string
	Plugin     string
	InstanceID string
	Record     string
	CreatedAt  time.Time
}

func (runLogRow) TableName() string { return "plugin_run_logs" }

// AppendRunLog stores the log record of one attempt; a second record of the same attempt is ignored.
func (s *Store) AppendRunLog(ctx context.Context, l *model.PluginRunLog) error {
	if l.CreatedAt.IsZero() {
		l.CreatedAt = s.now()
	}
	row := runLogRow{RunID: l.RunID, Attempt: l.Attempt, TenantID: l.TenantID, Plugin: l.Plugin, InstanceID: l.InstanceID, Record: l.Record,
		CreatedAt: l.CreatedAt.UTC()}
	if err := s.db.WithContext(ctx).Clauses(clause.OnConflict{DoNothing: true}).Create(&row).Error; err != nil {
		return fmt.Errorf("store: unable to store the log of plugin run %s: %w", l.RunID, err)
	}
	return nil
}

// RunLogs returns a run's log records by attempt; ENOTFOUND when there is none.
func (s *Store) RunLogs(ctx context.Context, tenant, runID string) ([]*model.PluginRunLog, error) {
	var rows []runLogRow
	if err := s.db.WithContext(ctx).Where("run_id = ? AND tenant_id = ?", runID, tenant).Order("attempt").Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("store: unable to read the log of plugin run %s: %w", runID, err)
	}
	if len(rows) == 0 {
		return nil, model.CodedError(model.ENOTFOUND, "plugin_log_not_found", "plugin run %q has no log (it has not finished an attempt yet, or its log was purged)", runID)
	}
	out := make([]*model.PluginRunLog, len(rows))
	for i, r := range rows {
		out[i] = &model.PluginRunLog{RunID: r.RunID, Attempt: r.Attempt, TenantID: r.TenantID, Plugin: r.Plugin, InstanceID: r.InstanceID,
			Record: r.Record, CreatedAt: r.CreatedAt.UTC()}
	}
	return out, nil
}
