package store

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/halley-bpm/halley/model"
)

type subscriptionRow struct {
	ID         string `gorm:"primaryKey"`
	TenantID   string
	Event      string
	Tkey       string
	Plugin     string
	WebhookURL string `gorm:"column:webhook_url"`
	Secret     string
	CreatedBy  string
	CreatedAt  time.Time
}

func (subscriptionRow) TableName() string { return "subscriptions" }

func (r *subscriptionRow) toModel() *model.Subscription {
	return &model.Subscription{ID: r.ID, TenantID: r.TenantID, Event: r.Event, Template: r.Tkey, Plugin: r.Plugin, WebhookURL: r.WebhookURL,
		Secret: r.Secret, HasSecret: r.Secret != "", CreatedBy: r.CreatedBy, CreatedAt: r.CreatedAt.UTC()}
}

type deliveryRow struct {
	ID             string `gorm:"primaryKey"`
	TenantID       string
	SubscriptionID string
	OutboxKey      string
	Event          string
	InstanceID     string
	Body           string
	Status         string
	Attempts       int
	StatusCode     int
	LastError      string
	NextAttemptAt  time.Time
	CreatedAt      time.Time
	LastAttemptAt  *time.Time
	FinishedAt     *time.Time
}

func (deliveryRow) TableName() string { return "subscription_deliveries" }

func (r *deliveryRow) toModel() *model.Delivery {
	d := &model.Delivery{ID: r.ID, TenantID: r.TenantID, SubscriptionID: r.SubscriptionID, OutboxKey: r.OutboxKey, Event: r.Event,
		InstanceID: r.InstanceID, Body: []byte(r.Body), Status: r.Status, Attempts: r.Attempts, StatusCode: r.StatusCode, LastError: r.LastError,
		CreatedAt: r.CreatedAt.UTC(), LastAttemptAt: utcPtr(r.LastAttemptAt), FinishedAt: utcPtr(r.FinishedAt)}
	if r.Status == model.DeliveryPending {
		next := r.NextAttemptAt.UTC()
		d.NextAttemptAt = &next
	}
	return d
}

var _ model.SubscriptionStore = (*Store)(nil)

// txKey carries a transaction in a context. DispatchOutbox hands its transaction to the outbox handlers this
// way, so that what they write (deliveries) commits or rolls back with the dispatch: on SQLite a second
// connection could not write at all while the dispatch holds the write lock, and on MySQL it makes creating the
// deliveries and deleting their outbox rows one atomic step.
type txKey struct{}

func withTx(ctx context.Context, tx *gorm.DB) context.Context {
	return context.WithValue(ctx, txKey{}, tx)
}

// txFrom returns the transaction ctx carries, or nil.
func txFrom(ctx context.Context) *gorm.DB {
	tx, _ := ctx.Value(txKey{}).(*gorm.DB)
	return tx
}

// conn returns the transaction ctx carries, else the pool: a handler running inside the dispatch needs no
// second connection.
func (s *Store) conn(ctx context.Context) *gorm.DB {
	if tx := txFrom(ctx); tx != nil {
		return tx
	}
	return s.db.WithContext(ctx)
}

// CreateSubscription stores a new subscription; ECONFLICT when the id exists.
func (s *Store) CreateSubscription(ctx context.Context, sub *model.Subscription) error {
	row := subscriptionRow{ID: sub.ID, TenantID: sub.TenantID, Event: sub.Event, Tkey: sub.Template, Plugin: sub.Plugin, WebhookURL: sub.WebhookURL,
		Secret: sub.Secret, CreatedBy: sub.CreatedBy, CreatedAt: sub.CreatedAt.UTC()}
	return s.inTx(ctx, func(tx *gorm.DB) error {
		if err := tx.Create(&row).Error; err != nil {
			if isDuplicate(err) {
				return model.CodedError(model.ECONFLICT, "subscription_exists", "subscription %q already exists", sub.ID)
			}
			return fmt.Errorf("store: unable to create subscription: %w", err)
		}
		if e := model.AuditFrom(ctx); e != nil && e.Target == "" {
			e.Target = sub.ID
		}
		return s.auditIn(ctx, tx, nil, sub.AuditState())
	})
}

// GetSubscription returns ENOTFOUND for an unknown id.
func (s *Store) GetSubscription(ctx context.Context, tenant, id string) (*model.Subscription, error) {
	var r subscriptionRow
	if err := s.db.WithContext(ctx).Where("tenant_id = ? AND id = ?", tenant, id).Take(&r).Error; err != nil {
		return nil, notFound(err, "subscription %q not found", id)
	}
	return r.toModel(), nil
}

// ListSubscriptions lists a tenant's subscriptions oldest first; the cursor encodes (created_at, id).
func (s *Store) ListSubscriptions(ctx context.Context, tenant string, page model.Page) ([]*model.Subscription, string, error) {
	q := s.db.WithContext(ctx).Where("tenant_id = ?", tenant)
	if page.Cursor != "" {
		at, id, err := decodeCursor(page.Cursor)
		if err != nil {
			return nil, "", err
		}
		q = q.Where("(created_at > ? OR (created_at = ? AND id > ?))", at, at, id)
	}
	var rows []subscriptionRow
	if err := q.Order("created_at, id").Limit(page.Limit + 1).Find(&rows).Error; err != nil {
		return nil, "", fmt.Errorf("store: unable to list subscriptions: %w", err)
	}
	next := ""
	if len(rows) > page.Limit {
		rows = rows[:page.Limit]
		next = encodeCursor(rows[len(rows)-1].CreatedAt, rows[len(rows)-1].ID)
	}
	out := make([]*model.Subscription, len(rows))
	for i := range rows {
		out[i] = rows[i].toModel()
	}
	return out, next, nil
}

// AllSubscriptions returns every subscription of every tenant without secrets (HasSecret is still set).
func (s *Store) AllSubscriptions(ctx context.Context) ([]*model.Subscription, error) {
	var rows []subscriptionRow
	if err := s.conn(ctx).Order("created_at, id").Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("store: unable to load subscriptions: %w", err)
	}
	out := make([]*model.Subscription, len(rows))
	for i := range rows {
		out[i] = rows[i].toModel()
		out[i].Secret = ""
	}
	return out, nil
}

// DeleteSubscription deletes a subscription and its delivery log; ENOTFOUND when unknown.
func (s *Store) DeleteSubscription(ctx context.Context, tenant, id string) error {
	return s.inTx(ctx, func(tx *gorm.DB) error {
		var before *model.Subscription
		if model.AuditFrom(ctx) != nil {
			var r subscriptionRow
			if err := tx.Clauses(s.lockClause()...).Where("tenant_id = ? AND id = ?", tenant, id).Take(&r).Error; err != nil {
				return notFound(err, "subscription %q not found", id)
			}
			before = r.toModel()
		}
		res := tx.Where("tenant_id = ? AND id = ?", tenant, id).Delete(&subscriptionRow{})
		if res.Error != nil {
			return fmt.Errorf("store: unable to delete subscription %s: %w", id, res.Error)
		}
		if res.RowsAffected == 0 {
			return model.Errorf(model.ENOTFOUND, "subscription %q not found", id)
		}
		if err := tx.Where("tenant_id = ? AND subscription_id = ?", tenant, id).Delete(&deliveryRow{}).Error; err != nil {
			return fmt.Errorf("store: unable to delete the deliveries of subscription %s: %w", id, err)
		}
		return s.auditIn(ctx, tx, before.AuditState(), nil)
	})
}

// AddDeliveries inserts the deliveries that are new by (subscription_id, outbox_key), in one transaction: the
// caller's when ctx carries one (the outbox dispatch), else its own. Existing ones are left alone.
func (s *Store) AddDeliveries(ctx context.Context, ds []*model.Delivery) (int, error) {
	if len(ds) == 0 {
		return 0, nil
	}
	if tx := txFrom(ctx); tx != nil {
		return s.addDeliveries(tx, ds)
	}
	var n int
	err := s.inTx(ctx, func(tx *gorm.DB) error {
		var err error
		n, err = s.addDeliveries(tx, ds)
		return err
	})
	return n, err
}

func (s *Store) addDeliveries(tx *gorm.DB, ds []*model.Delivery) (int, error) {
	var subs, keys []string
	seen := map[string]bool{}
	for _, d := range ds {
		if !seen["s"+d.SubscriptionID] {
			seen["s"+d.SubscriptionID] = true
			subs = append(subs, d.SubscriptionID)
		}
		if !seen["k"+d.OutboxKey] {
			seen["k"+d.OutboxKey] = true
			keys = append(keys, d.OutboxKey)
		}
	}
	type pair struct{ sub, key string }
	var have []struct {
		SubscriptionID string
		OutboxKey      string
	}
	if err := tx.Model(&deliveryRow{}).Select("subscription_id, outbox_key").
		Where("subscription_id IN ? AND outbox_key IN ?", subs, keys).Scan(&have).Error; err != nil {
		return 0, fmt.Errorf("store: unable to look up deliveries: %w", err)
	}
	exists := map[pair]bool{}
	for _, h := range have {
		exists[pair{h.SubscriptionID, h.OutboxKey}] = true
	}
	var rows []deliveryRow
	for _, d := range ds {
		p := pair{d.SubscriptionID, d.OutboxKey}
		if exists[p] {
			continue
		}
		exists[p] = true
		next := d.CreatedAt
		if d.NextAttemptAt != nil {
			next = *d.NextAttemptAt
		}
		rows = append(rows, deliveryRow{ID: d.ID, TenantID: d.TenantID, SubscriptionID: d.SubscriptionID, OutboxKey: d.OutboxKey, Event: d.Event,
			InstanceID: d.InstanceID, Body: string(d.Body), Status: d.Status, Attempts: d.Attempts, StatusCode: d.StatusCode, LastError: d.LastError,
			NextAttemptAt: next.UTC(), CreatedAt: d.CreatedAt.UTC(), LastAttemptAt: utcPtr(d.LastAttemptAt), FinishedAt: utcPtr(d.FinishedAt)})
	}
	if len(rows) == 0 {
		return 0, nil
	}
	// A concurrent writer may have inserted some meanwhile: the unique key decides, silently.
	res := tx.Clauses(clause.OnConflict{DoNothing: true}).CreateInBatches(&rows, 100)
	if res.Error != nil {
		return 0, fmt.Errorf("store: unable to add deliveries: %w", res.Error)
	}
	return int(res.RowsAffected), nil
}

// ClaimDeliveries leases up to n due pending deliveries. On MySQL rows locked by another replica's claim are
// skipped (FOR UPDATE SKIP LOCKED, at READ COMMITTED so that no gap lock blocks the inserts of new deliveries);
// on SQLite write transactions are serialised. Each claim counts an attempt and
// moves next_attempt_at to leaseUntil, so a delivery whose worker died becomes due again when the lease ends.
func (s *Store) ClaimDeliveries(ctx context.Context, n int, now, leaseUntil time.Time) ([]*model.Delivery, error) {
	// The loop polls every second: most polls find nothing, and should cost a read, not a write lock.
	var due []string
	if err := s.db.WithContext(ctx).Model(&deliveryRow{}).Select("id").Where("status = ? AND next_attempt_at <= ?", model.DeliveryPending, now.UTC()).
		Limit(1).Scan(&due).Error; err != nil {
		return nil, fmt.Errorf("store: unable to look for due deliveries: %w", err)
	}
	if len(due) == 0 {
		return nil, nil
	}
	var out []*model.Delivery
	err := s.inTxOpts(ctx, readCommitted, func(tx *gorm.DB) error {
		out = nil
		q := tx.Where("status = ? AND next_attempt_at <= ?", model.DeliveryPending, now.UTC()).Order("next_attempt_at, id").Limit(n)
		if s.dialect == MySQL {
			q = q.Clauses(clause.Locking{Strength: "UPDATE", Options: "SKIP LOCKED"})
		}
		var rows []deliveryRow
		if err := q.Find(&rows).Error; err != nil {
			return fmt.Errorf("store: unable to read due deliveries: %w", err)
		}
		if len(rows) == 0 {
			return nil
		}
		ids := make([]string, len(rows))
		subIDs := make([]string, 0, len(rows))
		for i, r := range rows {
			ids[i] = r.ID
			subIDs = append(subIDs, r.SubscriptionID)
		}
		if err := tx.Model(&deliveryRow{}).Where("id IN ?", ids).Updates(map[string]any{
			"attempts": gorm.Expr("attempts + 1"), "next_attempt_at": leaseUntil.UTC(), "last_attempt_at": now.UTC()}).Error; err != nil {
			return fmt.Errorf("store: unable to claim deliveries: %w", err)
		}
		var subs []subscriptionRow
		if err := tx.Where("id IN ?", subIDs).Find(&subs).Error; err != nil {
			return fmt.Errorf("store: unable to load the subscriptions of deliveries: %w", err)
		}
		byID := map[string]*model.Subscription{}
		for i := range subs {
			byID[subs[i].ID] = subs[i].toModel()
		}
		for i := range rows {
			r := &rows[i]
			r.Attempts++
			r.NextAttemptAt = leaseUntil.UTC()
			at := now.UTC()
			r.LastAttemptAt = &at
			d := r.toModel()
			d.Target = byID[r.SubscriptionID]
			out = append(out, d)
		}
		return nil
	})
	return out, err
}

// FinishDelivery records the outcome of an attempt unless the delivery moved on (another claim, a deletion).
func (s *Store) FinishDelivery(ctx context.Context, r model.DeliveryResult) (bool, error) {
	next := r.NextAttemptAt
	if r.FinishedAt != nil {
		next = *r.FinishedAt
	}
	res := s.db.WithContext(ctx).Model(&deliveryRow{}).Where("id = ? AND status = ? AND attempts = ?", r.ID, model.DeliveryPending, r.Attempt).
		Updates(map[string]any{"status": r.Status, "status_code": r.StatusCode, "last_error": r.Error, "next_attempt_at": next.UTC(), "finished_at": utcPtr(r.FinishedAt)})
	if res.Error != nil {
		return false, fmt.Errorf("store: unable to record delivery %s: %w", r.ID, res.Error)
	}
	return res.RowsAffected == 1, nil
}

// ListDeliveries lists a subscription's deliveries newest first; the cursor encodes (created_at, id).
func (s *Store) ListDeliveries(ctx context.Context, tenant, subscriptionID string, page model.Page) ([]*model.Delivery, string, error) {
	q := s.db.WithContext(ctx).Where("tenant_id = ? AND subscription_id = ?", tenant, subscriptionID)
	if page.Cursor != "" {
		at, id, err := decodeCursor(page.Cursor)
		if err != nil {
			return nil, "", err
		}
		q = q.Where("(created_at < ? OR (created_at = ? AND id < ?))", at, at, id)
	}
	var rows []deliveryRow
	if err := q.Order("created_at DESC, id DESC").Limit(page.Limit + 1).Find(&rows).Error; err != nil {
		return nil, "", fmt.Errorf("store: unable to list deliveries: %w", err)
	}
	next := ""
	if len(rows) > page.Limit {
		rows = rows[:page.Limit]
		next = encodeCursor(rows[len(rows)-1].CreatedAt, rows[len(rows)-1].ID)
	}
	out := make([]*model.Delivery, len(rows))
	for i := range rows {
		out[i] = rows[i].toModel()
	}
	return out, next, nil
}
