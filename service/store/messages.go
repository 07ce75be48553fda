package store

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/halley-bpm/halley/model"
)

type messageReceiptRow struct {
	TenantID  string `gorm:"primaryKey"`
	MessageID string `gorm:"primaryKey"`
	Answer    string
	CreatedAt time.Time
}

func (messageReceiptRow) TableName() string { return "message_receipts" }

type messageTriggerRow struct {
	TenantID string `gorm:"primaryKey"`
	Message  string `gorm:"primaryKey"`
	Tkey     string `gorm:"primaryKey"`
	Version  int
}

func (messageTriggerRow) TableName() string { return "message_triggers" }

var _ model.MessageStore = (*Store)(nil)

// ClaimMessageID inserts the id's row; the primary key decides which of several requests claims it.
func (s *Store) ClaimMessageID(ctx context.Context, tenant, id string, now, staleBefore time.Time) ([]byte, bool, error) {
	now = now.UTC().Truncate(time.Microsecond)
	row := messageReceiptRow{TenantID: tenant, MessageID: id, CreatedAt: now}
	err := s.db.WithContext(ctx).Create(&row).Error
	if err == nil {
		return nil, true, nil
	}
	if !isDuplicate(err) {
		return nil, false, fmt.Errorf("store: unable to record message id: %w", err)
	}
	var old messageReceiptRow
	if err := s.db.WithContext(ctx).Where("tenant_id = ? AND message_id = ?", tenant, id).Take(&old).Error; err != nil {
		return nil, false, fmt.Errorf("store: unable to read message id: %w", err)
	}
	if old.Answer != "" {
		return []byte(old.Answer), false, nil
	}
	if old.CreatedAt.Before(staleBefore.UTC()) {
		// Its request died without an answer: take the claim over, unless another request just did.
		res := s.db.WithContext(ctx).Model(&messageReceiptRow{}).
			Where("tenant_id = ? AND message_id = ? AND answer = ? AND created_at = ?", tenant, id, "", old.CreatedAt).
			Update("created_at", now)
		if res.Error != nil {
			return nil, false, fmt.Errorf("store: unable to take over message id: %w", res.Error)
		}
		return nil, res.RowsAffected == 1, nil
	}
	return nil, false, nil
}

// FinishMessageID stores the answer of the claiming request.
func (s *Store) FinishMessageID(ctx context.Context, tenant, id string, answer []byte) error {
	err := s.db.WithContext(ctx).Model(&messageReceiptRow{}).Where("tenant_id = ? AND message_id = ?", tenant, id).
		Update("answer", string(answer)).Error
	if err != nil {
		return fmt.Errorf("store: unable to store the answer of message %s: %w", id, err)
	}
	return nil
}

// AbandonMessageID deletes a claim without an answer.
func (s *Store) AbandonMessageID(ctx context.Context, tenant, id string) error {
	err := s.db.WithContext(ctx).Where("tenant_id = ? AND message_id = ? AND answer = ?", tenant, id, "").Delete(&messageReceiptRow{}).Error
	if err != nil {
		return fmt.Errorf("store: unable to release message id %s: %w", id, err)
	}
	return nil
}

// SetMessageTrigger replaces the message trigger of a template.
func (s *Store) SetMessageTrigger(ctx context.Context, tenant, key string, version int, message string) error {
	return s.inTx(ctx, func(tx *gorm.DB) error {
		if err := tx.Where("tenant_id = ? AND tkey = ?", tenant, key).Delete(&messageTriggerRow{}).Error; err != nil {
			return fmt.Errorf("store: unable to replace the message trigger of %s: %w", key, err)
		}
		if message == "" {
			return nil
		}
		if err := tx.Create(&messageTriggerRow{TenantID: tenant, Message: message, Tkey: key, Version: version}).Error; err != nil {
			return fmt.Errorf("store: unable to save the message trigger of %s: %w", key, err)
		}
		return nil
	})
}

// MessageTriggers lists the templates that start on a message name.
func (s *Store) MessageTriggers(ctx context.Context, tenant, message string) ([]model.MessageTrigger, error) {
	var rows []messageTriggerRow
	if err := s.db.WithContext(ctx).Where("tenant_id = ? AND message = ?", tenant, message).Order("tkey").Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("store: unable to list message triggers: %w", err)
	}
	out := make([]model.MessageTrigger, len(rows))
	for i, r := range rows {
		out[i] = model.MessageTrigger{Key: r.Tkey, Version: r.Version}
	}
	return out, nil
}
