package store

import (
	"context"
	"fmt"
	"io"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/attachments"
)

type attachmentRow struct {
	ID          string `gorm:"primaryKey"`
	TenantID    string
	Sha256      string `gorm:"column:sha256"`
	Name        string
	Size        int64
	ContentType string
	UploadedBy  string
	FormKey     string
	Storage     string
	CreatedAt   time.Time
}

func (attachmentRow) TableName() string { return "attachments" }

func (r *attachmentRow) toModel() *model.Attachment {
	return &model.Attachment{ID: r.ID, TenantID: r.TenantID, SHA256: r.Sha256, Name: r.Name, Size: r.Size, ContentType: r.ContentType,
		UploadedBy: r.UploadedBy, FormKey: r.FormKey, Storage: r.Storage, CreatedAt: r.CreatedAt}
}

type attachmentLinkRow struct {
	AttachmentID string `gorm:"primaryKey"`
	InstanceID   string `gorm:"primaryKey"`
	TenantID     string
	CreatedAt    time.Time
}

func (attachmentLinkRow) TableName() string { return "attachment_links" }

var _ model.AttachmentStore = (*Store)(nil)

// CreateAttachment stores a's row and, when content is not nil, its bytes in the blob tables (once per SHA-256),
// in one transaction: an attachment row never points to bytes that are not stored.
func (s *Store) CreateAttachment(ctx context.Context, a *model.Attachment, content io.ReadSeeker) error {
	a.CreatedAt = s.now()
	row := attachmentRow{ID: a.ID, TenantID: a.TenantID, Sha256: a.SHA256, Name: a.Name, Size: a.Size, ContentType: a.ContentType,
		UploadedBy: a.UploadedBy, FormKey: a.FormKey, Storage: a.Storage, CreatedAt: a.CreatedAt}
	create := func(tx *gorm.DB) error {
		if err := tx.Create(&row).Error; err != nil {
			return fmt.Errorf("store: unable to create attachment %s: %w", a.ID, err)
		}
		return nil
	}
	if content == nil {
		return s.inTx(ctx, create)
	}
	return s.storeWithBlob(ctx, content, func(tx *gorm.DB) error {
		if err := create(tx); err != nil {
			return err
		}
		return s.putBlob(tx, a.SHA256, a.Size, content)
	})
}

// GetAttachments returns the tenant's attachments with these ids, by id.
func (s *Store) GetAttachments(ctx context.Context, tenant string, ids []string) (map[string]*model.Attachment, error) {
	out := make(map[string]*model.Attachment, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	var rows []attachmentRow
	if err := s.db.WithContext(ctx).Where("tenant_id = ? AND id IN ?", tenant, ids).Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("store: unable to read attachments: %w", err)
	}
	for i := range rows {
		out[rows[i].ID] = rows[i].toModel()
	}
	return out, nil
}

// LinkAttachments records that the attachments are used in the instance; links that exist are kept.
func (s *Store) LinkAttachments(ctx context.Context, tenant, instanceID string, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	now := s.now()
	rows := make([]attachmentLinkRow, len(ids))
	for i, id := range ids {
		rows[i] = attachmentLinkRow{AttachmentID: id, InstanceID: instanceID, TenantID: tenant, CreatedAt: now}
	}
	return s.inTx(ctx, func(tx *gorm.DB) error {
		if err := tx.Clauses(clause.OnConflict{DoNothing: true}).Create(&rows).Error; err != nil {
			return fmt.Errorf("store: unable to link attachments to instance %s: %w", instanceID, err)
		}
		return nil
	})
}

// AttachmentLinks returns the instances the attachment is used in.
func (s *Store) AttachmentLinks(ctx context.Context, tenant, id string) ([]string, error) {
	var out []string
	err := s.db.WithContext(ctx).Model(&attachmentLinkRow{}).Where("tenant_id = ? AND attachment_id = ?", tenant, id).
		Order("instance_id").Pluck("instance_id", &out).Error
	if err != nil {
		return nil, fmt.Errorf("store: unable to read the links of attachment %s: %w", id, err)
	}
	return out, nil
}

// PurgeAttachments deletes up to limit attachments uploaded before cutoff that no instance uses, and then the
// blobs of those that neither another attachment nor a plugin version holds.
func (s *Store) PurgeAttachments(ctx context.Context, cutoff time.Time, limit int) ([]*model.Attachment, error) {
	var out []*model.Attachment
	err := s.inTx(ctx, func(tx *gorm.DB) error {
		out = out[:0]
		var rows []attachmentRow
		err := tx.Raw("SELECT a.* FROM attachments a WHERE a.created_at < ? AND NOT EXISTS (SELECT 1 FROM attachment_links l WHERE l.attachment_id = a.id) ORDER BY a.created_at LIMIT ?", cutoff, limit).
			Scan(&rows).Error
		if err != nil {
			return fmt.Errorf("store: unable to list unused attachments: %w", err)
		}
		for i := range rows {
			// Deleted only while still unlinked: a link made since the SELECT keeps it.
			res := tx.Exec("DELETE FROM attachments WHERE id = ? AND NOT EXISTS (SELECT 1 FROM attachment_links l WHERE l.attachment_id = ?)", rows[i].ID, rows[i].ID)
			if res.Error != nil {
				return fmt.Errorf("store: unable to delete attachment %s: %w", rows[i].ID, res.Error)
			}
			if res.RowsAffected == 0 {
				continue
			}
			out = append(out, rows[i].toModel())
			if rows[i].Storage != model.AttachmentsInDatabase {
				continue
			}
			err := tx.Exec("DELETE FROM blob_chunks WHERE sha256 = ? AND NOT EXISTS (SELECT 1 FROM attachments WHERE sha256 = ?) AND NOT EXISTS (SELECT 1 FROM plugins WHERE sha256 = ?)", rows[i].Sha256, rows[i].Sha256, rows[i].Sha256).Error
			if err == nil {
				err = tx.Exec("DELETE FROM blobs WHERE sha256 = ? AND NOT EXISTS (SELECT 1 FROM blob_chunks WHERE sha256 = ?) AND NOT EXISTS (SELECT 1 FROM attachments WHERE sha256 = ?) AND NOT EXISTS (SELECT 1 FROM plugins WHERE sha256 = ?)", rows[i].Sha256, rows[i].Sha256, rows[i].Sha256, rows[i].Sha256).Error
			}
			if err != nil {
				return fmt.Errorf("store: unable to delete the bytes of attachment %s: %w", rows[i].ID, err)
			}
		}
		return nil
	})
	return out, err
}

// AttachmentSHAInUse reports whether any attachment still has these bytes.
func (s *Store) AttachmentSHAInUse(ctx context.Context, sum string) (bool, error) {
	var n int64
	if err := s.db.WithContext(ctx).Model(&attachmentRow{}).Where("sha256 = ?", sum).Count(&n).Error; err != nil {
		return false, fmt.Errorf("store: unable to look up attachments of %s: %w", sum, err)
	}
	return n > 0, nil
}

var _ attachments.LegacyContexts = (*Store)(nil)

// ContextsWithDataURLs returns, by id, up to limit instances after the id after whose context holds the text
// "data_url" (the data-URL migration of service/attachments).
func (s *Store) ContextsWithDataURLs(ctx context.Context, after string, limit int) ([]attachments.LegacyContext, error) {
	var rows []instanceRow
	err := s.db.WithContext(ctx).Select("id", "tenant_id", "initiator", "context").
		Where("id > ? AND context LIKE ?", after, `%"data_url"%`).Order("id").Limit(limit).Find(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("store: unable to list contexts with data URLs: %w", err)
	}
	out := make([]attachments.LegacyContext, len(rows))
	for i, r := range rows {
		out[i] = attachments.LegacyContext{ID: r.ID, TenantID: r.TenantID, Initiator: r.Initiator, Context: r.Context}
	}
	return out, nil
}

// SwapContext replaces the context of the instance id by next if it still is old; false when it changed.
func (s *Store) SwapContext(ctx context.Context, id, old, next string) (bool, error) {
	// The rev goes up with the context, as with a step's write: a step cache holding the old row then misses.
	res := s.db.WithContext(ctx).Model(&instanceRow{}).Where("id = ? AND context = ?", id, old).
		Updates(map[string]any{"context": next, "rev": gorm.Expr("rev + 1")})
	if res.Error != nil {
		return false, fmt.Errorf("store: unable to rewrite the context of %s: %w", id, res.Error)
	}
	return res.RowsAffected == 1, nil
}
