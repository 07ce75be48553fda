package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/halley-bpm/halley/model"
)

type templateRow struct {
	TenantID       string `gorm:"primaryKey"`
	Tkey           string `gorm:"primaryKey"`
	Name           string
	Description    string
	I18n           sql.NullString `gorm:"column:i18n"`
	Draft          string
	DraftUpdatedAt time.Time
	LatestVersion  *int
	StartKind      string
	Hidden         bool
	CreatedBy      string
	CreatedAt      time.Time
	UpdatedAt      time.Time
}

func (templateRow) TableName() string { return "templates" }

func (r *templateRow) toModel() *model.Template {
	t := &model.Template{TenantID: r.TenantID, Key: r.Tkey, Name: r.Name, Description: r.Description, Draft: json.RawMessage(r.Draft),
		DraftUpdatedAt: r.DraftUpdatedAt.UTC(), LatestVersion: r.LatestVersion, Hidden: r.Hidden, CreatedBy: r.CreatedBy,
		CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(), StartKind: r.StartKind}
	if r.I18n.Valid && r.I18n.String != "" {
		_ = json.Unmarshal([]byte(r.I18n.String), &t.I18n) // labels: a row that does not read shows the plain name
	}
	return t
}

// labelsColumn is the templates.i18n value of a definition: its labels as JSON, NULL when it has none.
func labelsColumn(def json.RawMessage) sql.NullString {
	l := model.TemplateLabelsOf(def)
	if len(l) == 0 {
		return sql.NullString{}
	}
	b, err := json.Marshal(l)
	if err != nil {
		return sql.NullString{}
	}
	return sql.NullString{String: string(b), Valid: true}
}

type versionRow struct {
	TenantID    string `gorm:"primaryKey"`
	Tkey        string `gorm:"primaryKey"`
	Version     int    `gorm:"primaryKey"`
	Definition  string
	PublishedAt time.Time
	PublishedBy string
}

func (versionRow) TableName() string { return "template_versions" }

func (r *versionRow) toModel() *model.TemplateVersion {
	return &model.TemplateVersion{TenantID: r.TenantID, Key: r.Tkey, Version: r.Version, Definition: json.RawMessage(r.Definition),
		PublishedAt: r.PublishedAt.UTC(), PublishedBy: r.PublishedBy}
}

var _ model.TemplateStore = (*Store)(nil)

func (s *Store) lockClause() []clause.Expression {
	if s.dialect == MySQL {
		return []clause.Expression{clause.Locking{Strength: "UPDATE"}}
	}
	return nil // SQLite: write transactions are serialised by BEGIN IMMEDIATE
}

// CreateTemplate returns ECONFLICT when the key exists.
func (s *Store) CreateTemplate(ctx context.Context, t *model.Template) error {
	now := s.now()
	t.CreatedAt, t.UpdatedAt, t.DraftUpdatedAt = now, now, now
	t.I18n = model.TemplateLabelsOf(t.Draft)
	row := templateRow{TenantID: t.TenantID, Tkey: t.Key, Name: t.Name, Description: t.Description, I18n: labelsColumn(t.Draft), Draft: string(t.Draft),
		DraftUpdatedAt: now, Hidden: t.Hidden, CreatedBy: t.CreatedBy, CreatedAt: now, UpdatedAt: now}
	return s.inTx(ctx, func(tx *gorm.DB) error {
		if err := tx.Create(&row).Error; err != nil {
			if isDuplicate(err) {
				return model.CodedError(model.ECONFLICT, "template_exists", "a template with key %q already exists", t.Key)
			}
			return fmt.Errorf("store: unable to create template %s: %w", t.Key, err)
		}
		return s.auditIn(ctx, tx, nil, map[string]any{"key": t.Key, "name": t.Name, "description": t.Description,
			"definition": model.MaskDefinitionSecrets(t.Draft)})
	})
}

// GetTemplate returns ENOTFOUND when there is no such (visible) template.
func (s *Store) GetTemplate(ctx context.Context, tenant, key string) (*model.Template, error) {
	var r templateRow
	if err := s.db.WithContext(ctx).Where("tenant_id = ? AND tkey = ?", tenant, key).Take(&r).Error; err != nil {
		return nil, notFound(err, "template %q not found", key)
	}
	return r.toModel(), nil
}

// LatestVersion implements model.TemplateStore, with prebuilt SQL (it runs at every start).
func (s *Store) LatestVersion(ctx context.Context, tenant, key string) (int, error) {
	var v sql.NullInt64
	err := s.sqlDB.QueryRowContext(ctx, "SELECT latest_version FROM templates WHERE tenant_id = ? AND tkey = ?", tenant, key).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, model.Errorf(model.ENOTFOUND, "template %q not found", key)
	}
	if err != nil {
		return 0, fmt.Errorf("store: unable to read template %s: %w", key, err)
	}
	return int(v.Int64), nil
}

// SaveDraft replaces the draft. ENOTFOUND for an unknown template. When the change is audited, the draft it
// replaces is read under the row's lock, so the entry's before is exactly what was overwritten.
func (s *Store) SaveDraft(ctx context.Context, tenant, key string, draft json.RawMessage, at time.Time) error {
	return s.inTx(ctx, func(tx *gorm.DB) error {
		var before json.RawMessage
		if model.AuditFrom(ctx) != nil {
			var t templateRow
			if err := tx.Clauses(s.lockClause()...).Select("draft").Where("tenant_id = ? AND tkey = ? AND hidden = ?", tenant, key, false).Take(&t).Error; err != nil {
				return notFound(err, "template %q not found", key)
			}
			before = model.MaskDefinitionSecrets(json.RawMessage(t.Draft))
		}
		res := tx.Model(&templateRow{}).Where("tenant_id = ? AND tkey = ? AND hidden = ?", tenant, key, false).
			Updates(map[string]any{"draft": string(draft), "draft_updated_at": at.UTC(), "updated_at": at.UTC()})
		if res.Error != nil {
			return fmt.Errorf("store: unable to save draft of %s: %w", key, res.Error)
		}
		if res.RowsAffected == 0 {
			// MySQL counts the rows an UPDATE changed: the same draft saved again within the same microsecond
			// changes none, and is no unknown template.
			var n int64
			if err := tx.Model(&templateRow{}).Where("tenant_id = ? AND tkey = ? AND hidden = ?", tenant, key, false).Count(&n).Error; err != nil {
				return fmt.Errorf("store: unable to save draft of %s: %w", key, err)
			}
			if n == 0 {
				return model.Errorf(model.ENOTFOUND, "template %q not found", key)
			}
		}
		return s.auditIn(ctx, tx, map[string]any{"definition": before}, map[string]any{"definition": model.MaskDefinitionSecrets(draft)})
	})
}

// PublishVersion stores the next version under the template row's lock.
func (s *Store) PublishVersion(ctx context.Context, tenant, key string, def json.RawMessage, by string, at time.Time, check func(version int) error) (*model.TemplateVersion, error) {
	var out *model.TemplateVersion
	err := s.inTx(ctx, func(tx *gorm.DB) error {
		var t templateRow
		if err := tx.Clauses(s.lockClause()...).Where("tenant_id = ? AND tkey = ? AND hidden = ?", tenant, key, false).Take(&t).Error; err != nil {
			return notFound(err, "template %q not found", key)
		}
		next := 1
		if t.LatestVersion != nil {
			next = *t.LatestVersion + 1
		}
		if check != nil {
			if err := check(next); err != nil {
				return err
			}
		}
		v := versionRow{TenantID: tenant, Tkey: key, Version: next, Definition: string(def), PublishedAt: at.UTC(), PublishedBy: by}
		if err := tx.Create(&v).Error; err != nil {
			return fmt.Errorf("store: unable to publish %s version %d: %w", key, next, err)
		}
		var kind string
		var probe struct {
			Nodes []struct {
				Type    string `json:"type"`
				Trigger struct {
					Kind string `json:"kind"`
				} `json:"trigger"`
			} `json:"nodes"`
		}
		if json.Unmarshal(def, &probe) == nil {
			for _, n := range probe.Nodes {
				if n.Type == model.NodeStart {
					kind = n.Trigger.Kind
				}
			}
		}
		if err := tx.Model(&templateRow{}).Where("tenant_id = ? AND tkey = ?", tenant, key).
			Updates(map[string]any{"latest_version": next, "start_kind": kind, "i18n": labelsColumn(def), "updated_at": at.UTC()}).Error; err != nil {
			return fmt.Errorf("store: unable to record version %d of %s: %w", next, key, err)
		}
		out = v.toModel()
		return s.auditIn(ctx, tx, map[string]any{"latest_version": t.LatestVersion}, map[string]any{"latest_version": next})
	})
	return out, err
}

// GetVersion returns ENOTFOUND for an unknown version.
func (s *Store) GetVersion(ctx context.Context, tenant, key string, version int) (*model.TemplateVersion, error) {
	var r versionRow
	if err := s.db.WithContext(ctx).Where("tenant_id = ? AND tkey = ? AND version = ?", tenant, key, version).Take(&r).Error; err != nil {
		return nil, notFound(err, "template %q has no version %d", key, version)
	}
	return r.toModel(), nil
}

// ListVersions lists the versions of a template, oldest first, without their definitions.
func (s *Store) ListVersions(ctx context.Context, tenant, key string) ([]*model.TemplateVersion, error) {
	var rows []versionRow
	if err := s.db.WithContext(ctx).Select("tenant_id", "tkey", "version", "published_at", "published_by").
		Where("tenant_id = ? AND tkey = ?", tenant, key).Order("version").Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("store: unable to list versions of %s: %w", key, err)
	}
	out := make([]*model.TemplateVersion, len(rows))
	for i := range rows {
		out[i] = rows[i].toModel()
		out[i].Definition = nil
	}
	return out, nil
}

// ListTemplates pages through the visible templates by key.
func (s *Store) ListTemplates(ctx context.Context, tenant string, page model.Page) ([]*model.Template, string, error) {
	q := s.db.WithContext(ctx).Select("tenant_id", "tkey", "name", "description", "i18n", "latest_version", "start_kind", "created_by", "created_at", "updated_at").
		Where("tenant_id = ? AND hidden = ?", tenant, false)
	if page.Cursor != "" {
		q = q.Where("tkey > ?", page.Cursor)
	}
	var rows []templateRow
	if err := q.Order("tkey").Limit(page.Limit + 1).Find(&rows).Error; err != nil {
		return nil, "", fmt.Errorf("store: unable to list templates: %w", err)
	}
	next := ""
	if len(rows) > page.Limit {
		rows = rows[:page.Limit]
		next = rows[len(rows)-1].Tkey
	}
	out := make([]*model.Template, len(rows))
	for i := range rows {
		out[i] = rows[i].toModel()
	}
	return out, next, nil
}

// CreateHiddenVersion stores a one-off template with its version 1.
func (s *Store) CreateHiddenVersion(ctx context.Context, t *model.Template, v *model.TemplateVersion) error {
	return s.inTx(ctx, func(tx *gorm.DB) error {
		one := 1
		now := s.now()
		row := templateRow{TenantID: t.TenantID, Tkey: t.Key, Name: t.Name, Description: t.Description, Draft: string(v.Definition),
			DraftUpdatedAt: now, LatestVersion: &one, StartKind: model.TriggerManual, Hidden: true, CreatedBy: t.CreatedBy, CreatedAt: now, UpdatedAt: now}
		if err := tx.Create(&row).Error; err != nil {
			return fmt.Errorf("store: unable to create linear template: %w", err)
		}
		vr := versionRow{TenantID: t.TenantID, Tkey: t.Key, Version: 1, Definition: string(v.Definition), PublishedAt: now, PublishedBy: v.PublishedBy}
		if err := tx.Create(&vr).Error; err != nil {
			return fmt.Errorf("store: unable to create linear template version: %w", err)
		}
		return nil
	})
}
