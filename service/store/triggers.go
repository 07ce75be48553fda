package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/halley-bpm/halley/model"
)

type apiTriggerRow struct {
	TenantID string `gorm:"primaryKey"`
	Module   string `gorm:"primaryKey"`
	Func     string `gorm:"primaryKey"`
	Tkey     string
	Version  int
}

func (apiTriggerRow) TableName() string { return "api_triggers" }

type triggerLogRow struct {
	Seq        int64 `gorm:"primaryKey;autoIncrement"`
	TenantID   string
	Tkey       string
	Version    int
	Kind       string
	Action     string
	At         time.Time
	InstanceID string
	Detail     string
}

func (triggerLogRow) TableName() string { return "trigger_log" }

var _ model.TriggerStore = (*Store)(nil)

// APIRouteOwner returns the template owning module/function, or "".
func (s *Store) APIRouteOwner(ctx context.Context, tenant, module, function string) (string, int, error) {
	// On database/sql with prebuilt SQL: every API trigger call asks (see sqlbatch.go).
	var (
		key     string
		version int
	)
	err := s.sqlDB.QueryRowContext(ctx, "SELECT tkey, version FROM api_triggers WHERE tenant_id = ? AND module = ? AND func = ? LIMIT 1",
		tenant, module, function).Scan(&key, &version)
	if errors.Is(err, sql.ErrNoRows) {
		return "", 0, nil
	}
	if err != nil {
		return "", 0, fmt.Errorf("store: unable to look up API trigger: %w", err)
	}
	return key, version, nil
}

// SetAPIRoutes replaces a template's routes; ECONFLICT when another template owns one.
func (s *Store) SetAPIRoutes(ctx context.Context, tenant, key string, version int, routes []model.APITriggerRoute) error {
	return s.inTx(ctx, func(tx *gorm.DB) error {
		for _, r := range routes {
			var rows []apiTriggerRow
			if err := tx.Clauses(s.lockClause()...).Where("tenant_id = ? AND module = ? AND func = ?", tenant, r.Module, r.Function).Find(&rows).Error; err != nil {
				return fmt.Errorf("store: unable to check API trigger: %w", err)
			}
			if len(rows) > 0 && rows[0].Tkey != key {
				return model.CodedError(model.EUNPROCESSABLE, "trigger_taken", "module %q function %q is already the trigger of template %q", r.Module, r.Function, rows[0].Tkey)
			}
		}
		if err := tx.Where("tenant_id = ? AND tkey = ?", tenant, key).Delete(&apiTriggerRow{}).Error; err != nil {
			return fmt.Errorf("store: unable to replace API triggers: %w", err)
		}
		for _, r := range routes {
			row := apiTriggerRow{TenantID: tenant, Module: r.Module, Func: r.Function, Tkey: key, Version: version}
			if err := tx.Create(&row).Error; err != nil {
				if isDuplicate(err) {
					return model.CodedError(model.EUNPROCESSABLE, "trigger_taken", "module %q function %q is already taken", r.Module, r.Function)
				}
				return fmt.Errorf("store: unable to save API trigger: %w", err)
			}
		}
		return nil
	})
}

// CancelCronTimers cancels a template's pending crontab timers (their node_id holds the template key).
func (s *Store) CancelCronTimers(ctx context.Context, tenant, key string) ([]string, error) {
	var ids []string
	err := s.inTx(ctx, func(tx *gorm.DB) error {
		ids = nil
		if err := tx.Model(&timerRow{}).Where("tenant_id = ? AND kind = ? AND node_id = ? AND status = ?", tenant, model.TimerCrontab, key, model.TimerPending).
			Pluck("id", &ids).Error; err != nil {
			return fmt.Errorf("store: unable to list crontab timers: %w", err)
		}
		if len(ids) == 0 {
			return nil
		}
		return tx.Model(&timerRow{}).Where("id IN ?", ids).Update("status", model.TimerCancelled).Error
	})
	return ids, err
}

// RunningInstance returns a running instance of the template started by initiator, or "".
func (s *Store) RunningInstance(ctx context.Context, tenant, key, initiator string) (string, error) {
	var ids []string
	err := s.db.WithContext(ctx).Model(&instanceRow{}).Where("tenant_id = ? AND tkey = ? AND initiator = ? AND status = ?", tenant, key, initiator, string(model.StatusRunning)).
		Limit(1).Pluck("id", &ids).Error
	if err != nil || len(ids) == 0 {
		return "", err
	}
	return ids[0], nil
}

// AppendTriggerLog records what a trigger did.
func (s *Store) AppendTriggerLog(ctx context.Context, e *model.TriggerLogEntry) error {
	row := triggerLogRow{TenantID: e.TenantID, Tkey: e.Key, Version: e.Version, Kind: e.Kind, Action: e.Action, At: e.At.UTC(), InstanceID: e.InstanceID, Detail: e.Detail}
	if err := s.db.WithContext(ctx).Create(&row).Error; err != nil {
		return fmt.Errorf("store: unable to append trigger log: %w", err)
	}
	return nil
}

// TriggerLog returns a template's newest trigger log entries first.
func (s *Store) TriggerLog(ctx context.Context, tenant, key string, limit int) ([]*model.TriggerLogEntry, error) {
	var rows []triggerLogRow
	if err := s.db.WithContext(ctx).Where("tenant_id = ? AND tkey = ?", tenant, key).Order("seq DESC").Limit(limit).Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("store: unable to read trigger log: %w", err)
	}
	out := make([]*model.TriggerLogEntry, len(rows))
	for i, r := range rows {
		out[i] = &model.TriggerLogEntry{TenantID: r.TenantID, Key: r.Tkey, Version: r.Version, Kind: r.Kind, Action: r.Action, At: r.At.UTC(), InstanceID: r.InstanceID, Detail: r.Detail}
	}
	return out, nil
}
