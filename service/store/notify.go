package store

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/halley-bpm/halley/model"
)

type channelRow struct {
	TenantID  string `gorm:"primaryKey"`
	Name      string `gorm:"primaryKey"`
	Kind      string
	Config    string
	Secrets   string
	SentLog   string
	CreatedBy string
	CreatedAt time.Time
}

func (channelRow) TableName() string { return "notification_channels" }

func (r *channelRow) toModel() *model.Channel {
	c := &model.Channel{TenantID: r.TenantID, Name: r.Name, Kind: r.Kind, Secrets: r.Secrets, CreatedBy: r.CreatedBy, CreatedAt: r.CreatedAt.UTC()}
	_ = json.Unmarshal([]byte(r.Config), &c.Config) // written by CreateChannel from a map: always an object
	if c.Config == nil {
		c.Config = map[string]any{}
	}
	return c
}

type notificationRow struct {
	ID         string `gorm:"primaryKey"`
	TenantID   string
	Username   string
	DedupeKey  string
	Event      string
	InstanceID string
	TaskID     string
	Title      string
	NodeName   string
	Message    string
	Link       string
	CreatedAt  time.Time
	ReadAt     *time.Time
}

func (notificationRow) TableName() string { return "notifications" }

func (r *notificationRow) toModel() *model.Notification {
	return &model.Notification{ID: r.ID, TenantID: r.TenantID, Username: r.Username, Key: r.DedupeKey, Event: r.Event, InstanceID: r.InstanceID,
		TaskID: r.TaskID, Title: r.Title, NodeName: r.NodeName, Message: r.Message, Link: r.Link, At: r.CreatedAt.UTC(), Read: r.ReadAt != nil,
		ReadAt: utcPtr(r.ReadAt)}
}

type notifyDeliveryRow struct {
	ID            string `gorm:"primaryKey"`
	TenantID      string
	Channel       string
	Kind          string
	Recipient     string
	DedupeKey     string
	Event         string
	InstanceID    string
	TaskID        string
	Message       string
	Status        string
	Attempts      int
	LastError     string
	NextAttemptAt time.Time
	CreatedAt     time.Time
	LastAttemptAt *time.Time
	FinishedAt    *time.Time
}

func (notifyDeliveryRow) TableName() string { return "notification_deliveries" }

func (r *notifyDeliveryRow) toModel() *model.NotificationDelivery {
	d := &model.NotificationDelivery{ID: r.ID, TenantID: r.TenantID, Channel: r.Channel, Kind: r.Kind, Recipient: r.Recipient, Key: r.DedupeKey,
		Event: r.Event, InstanceID: r.InstanceID, TaskID: r.TaskID, Message: []byte(r.Message), Status: r.Status, Attempts: r.Attempts,
		LastError: r.LastError, CreatedAt: r.CreatedAt.UTC(), LastAttemptAt: utcPtr(r.LastAttemptAt), FinishedAt: utcPtr(r.FinishedAt)}
	if r.Status == model.DeliveryPending {
		next := r.NextAttemptAt.UTC()
		d.NextAttemptAt = &next
	}
	return d
}

type notifySettingsRow struct {
	TenantID  string `gorm:"primaryKey"`
	Settings  string
	UpdatedBy string
	UpdatedAt time.Time
}

func (notifySettingsRow) TableName() string { return "notification_settings" }

func (r *notifySettingsRow) toModel() (*model.NotificationSettings, error) {
	var s model.NotificationSettings
	if err := json.Unmarshal([]byte(r.Settings), &s); err != nil {
		return nil, fmt.Errorf("store: the notification settings of tenant %s are unreadable: %w", r.TenantID, err)
	}
	at := r.UpdatedAt.UTC()
	s.UpdatedBy, s.UpdatedAt = r.UpdatedBy, &at
	return &s, nil
}

var _ model.NotifyStore = (*Store)(nil)

// CreateChannel stores a new channel (and its audit entry); ECONFLICT channel_exists when the name is taken.
func (s *Store) CreateChannel(ctx context.Context, c *model.Channel) error {
	cfg, err := json.Marshal(c.Config)
	if err != nil {
		return fmt.Errorf("store: unable to encode the config of channel %s: %w", c.Name, err)
	}
	row := channelRow{TenantID: c.TenantID, Name: c.Name, Kind: c.Kind, Config: string(cfg), Secrets: c.Secrets, SentLog: "[]",
		CreatedBy: c.CreatedBy, CreatedAt: c.CreatedAt.UTC()}
	return s.inTx(ctx, func(tx *gorm.DB) error {
		if err := tx.Create(&row).Error; err != nil {
			if isDuplicate(err) {
				return model.CodedError(model.ECONFLICT, "channel_exists", "a channel named %q exists; delete it first to replace it", c.Name)
			}
			return fmt.Errorf("store: unable to create channel %s: %w", c.Name, err)
		}
		return s.auditIn(ctx, tx, nil, c.AuditState())
	})
}

// GetChannel returns a channel with its sealed secrets; ENOTFOUND when unknown.
func (s *Store) GetChannel(ctx context.Context, tenant, name string) (*model.Channel, error) {
	var r channelRow
	if err := s.conn(ctx).Where("tenant_id = ? AND name = ?", tenant, name).Take(&r).Error; err != nil {
		return nil, notFound(err, "channel %q not found", name)
	}
	return r.toModel(), nil
}

// ListChannels lists a tenant's channels by name.
func (s *Store) ListChannels(ctx context.Context, tenant string) ([]*model.Channel, error) {
	var rows []channelRow
	if err := s.conn(ctx).Where("tenant_id = ?", tenant).Order("name").Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("store: unable to list channels: %w", err)
	}
	out := make([]*model.Channel, len(rows))
	for i := range rows {
		out[i] = rows[i].toModel()
	}
	return out, nil
}

// DeleteChannel deletes a channel and fails its pending deliveries; ENOTFOUND when unknown.
func (s *Store) DeleteChannel(ctx context.Context, tenant, name string) error {
	return s.inTx(ctx, func(tx *gorm.DB) error {
		var r channelRow
		if err := tx.Clauses(s.lockClause()...).Where("tenant_id = ? AND name = ?", tenant, name).Take(&r).Error; err != nil {
			return notFound(err, "channel %q not found", name)
		}
		if err := tx.Where("tenant_id = ? AND name = ?", tenant, name).Delete(&channelRow{}).Error; err != nil {
			return fmt.Errorf("store: unable to delete channel %s: %w", name, err)
		}
		if _, err := s.failDeliveries(tx, tenant, name); err != nil {
			return err
		}
		return s.auditIn(ctx, tx, r.toModel().AuditState(), nil)
	})
}

func (s *Store) failDeliveries(tx *gorm.DB, tenant, name string) (int64, error) {
	now := s.now()
	res := tx.Model(&notifyDeliveryRow{}).Where("tenant_id = ? AND channel = ? AND status = ?", tenant, name, model.DeliveryPending).
		Updates(map[string]any{"status": model.DeliveryFailed, "last_error": "the channel was deleted", "finished_at": now, "next_attempt_at": now})
	if res.Error != nil {
		return 0, fmt.Errorf("store: unable to fail the deliveries of channel %s: %w", name, res.Error)
	}
	return res.RowsAffected, nil
}

// FailChannelDeliveries implements model.NotifyStore.
func (s *Store) FailChannelDeliveries(ctx context.Context, tenant, name string) (int64, error) {
	var n int64
	err := s.inTx(ctx, func(tx *gorm.DB) error {
		var rows []channelRow
		if err := tx.Clauses(s.lockClause()...).Where("tenant_id = ? AND name = ?", tenant, name).Limit(1).Find(&rows).Error; err != nil {
			return fmt.Errorf("store: unable to read channel %s: %w", name, err)
		}
		if len(rows) > 0 {
			return nil // it exists (again): its deliveries are sent
		}
		var err error
		n, err = s.failDeliveries(tx, tenant, name)
		return err
	})
	return n, err
}

// NotificationSettings returns the tenant's settings; zero settings when none were saved.
func (s *Store) NotificationSettings(ctx context.Context, tenant string) (*model.NotificationSettings, error) {
	var rows []notifySettingsRow
	if err := s.conn(ctx).Where("tenant_id = ?", tenant).Limit(1).Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("store: unable to read notification settings: %w", err)
	}
	if len(rows) == 0 {
		return &model.NotificationSettings{}, nil
	}
	return rows[0].toModel()
}

// AllNotificationSettings returns every tenant's saved settings.
func (s *Store) AllNotificationSettings(ctx context.Context) (map[string]*model.NotificationSettings, error) {
	var rows []notifySettingsRow
	if err := s.conn(ctx).Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("store: unable to read notification settings: %w", err)
	}
	out := make(map[string]*model.NotificationSettings, len(rows))
	for i := range rows {
		st, err := rows[i].toModel()
		if err != nil {
			return nil, err
		}
		out[rows[i].TenantID] = st
	}
	return out, nil
}

// PutNotificationSettings saves the tenant's settings (and the audit entry, with before and after).
func (s *Store) PutNotificationSettings(ctx context.Context, tenant string, st *model.NotificationSettings) error {
	doc := *st
	doc.UpdatedBy, doc.UpdatedAt = "", nil
	b, err := json.Marshal(doc)
	if err != nil {
		return fmt.Errorf("store: unable to encode notification settings: %w", err)
	}
	at := s.now()
	if st.UpdatedAt != nil {
		at = st.UpdatedAt.UTC()
	}
	row := notifySettingsRow{TenantID: tenant, Settings: string(b), UpdatedBy: st.UpdatedBy, UpdatedAt: at}
	return s.inTx(ctx, func(tx *gorm.DB) error {
		var before []notifySettingsRow
		if err := tx.Clauses(s.lockClause()...).Where("tenant_id = ?", tenant).Find(&before).Error; err != nil {
			return fmt.Errorf("store: unable to read notification settings: %w", err)
		}
		if err := tx.Clauses(clause.OnConflict{Columns: []clause.Column{{Name: "tenant_id"}},
			DoUpdates: clause.AssignmentColumns([]string{"settings", "updated_by", "updated_at"})}).Create(&row).Error; err != nil {
			return fmt.Errorf("store: unable to save notification settings: %w", err)
		}
		var prev any
		if len(before) == 1 {
			prev = json.RawMessage(before[0].Settings)
		}
		return s.auditIn(ctx, tx, prev, json.RawMessage(b))
	})
}

// AddNotifications inserts the notifications that are new by (tenant, username, key), in the transaction ctx
// carries or in its own.
func (s *Store) AddNotifications(ctx context.Context, ns []*model.Notification) (int, error) {
	if len(ns) == 0 {
		return 0, nil
	}
	rows := make([]notificationRow, len(ns))
	for i, n := range ns {
		rows[i] = notificationRow{ID: n.ID, TenantID: n.TenantID, Username: n.Username, DedupeKey: n.Key, Event: n.Event, InstanceID: n.InstanceID,
			TaskID: n.TaskID, Title: n.Title, NodeName: n.NodeName, Message: n.Message, Link: n.Link, CreatedAt: n.At.UTC(), ReadAt: utcPtr(n.ReadAt)}
	}
	return s.insertNew(ctx, &rows, len(rows))
}

// AddNotificationDeliveries inserts the deliveries that are new by (tenant, channel, recipient, key).
func (s *Store) AddNotificationDeliveries(ctx context.Context, ds []*model.NotificationDelivery) (int, error) {
	if len(ds) == 0 {
		return 0, nil
	}
	rows := make([]notifyDeliveryRow, len(ds))
	for i, d := range ds {
		next := d.CreatedAt
		if d.NextAttemptAt != nil {
			next = *d.NextAttemptAt
		}
		rows[i] = notifyDeliveryRow{ID: d.ID, TenantID: d.TenantID, Channel: d.Channel, Kind: d.Kind, Recipient: d.Recipient, DedupeKey: d.Key,
			Event: d.Event, InstanceID: d.InstanceID, TaskID: d.TaskID, Message: string(d.Message), Status: d.Status, Attempts: d.Attempts,
			LastError: d.LastError, NextAttemptAt: next.UTC(), CreatedAt: d.CreatedAt.UTC(), LastAttemptAt: utcPtr(d.LastAttemptAt), FinishedAt: utcPtr(d.FinishedAt)}
	}
	return s.insertNew(ctx, &rows, len(rows))
}

// The columns of a notification and a delivery row as a step writes them (writeWorks), in the order of
// notificationArgs and deliveryArgs.
const (
	notificationCols  = "id, tenant_id, username, dedupe_key, event, instance_id, task_id, title, node_name, message, link, created_at, read_at"
	notificationColsN = 13
	deliveryCols      = "id, tenant_id, channel, kind, recipient, dedupe_key, event, instance_id, task_id, message, status, attempts, last_error, " +
		"next_attempt_at, created_at, last_attempt_at, finished_at"
	deliveryColsN = 17
)

func notificationArgs(n *model.Notification) []any {
	return []any{n.ID, n.TenantID, n.Username, n.Key, n.Event, n.InstanceID, n.TaskID, n.Title, n.NodeName, n.Message, n.Link, n.At.UTC(), utcPtr(n.ReadAt)}
}

func deliveryArgs(d *model.NotificationDelivery) []any {
	next := d.CreatedAt
	if d.NextAttemptAt != nil {
		next = *d.NextAttemptAt
	}
	return []any{d.ID, d.TenantID, d.Channel, d.Kind, d.Recipient, d.Key, d.Event, d.InstanceID, d.TaskID, string(d.Message), d.Status, d.Attempts,
		d.LastError, next.UTC(), d.CreatedAt.UTC(), utcPtr(d.LastAttemptAt), utcPtr(d.FinishedAt)}
}

// insertNew inserts rows, leaving out those whose unique key exists (a re-dispatched outbox batch), in the
// transaction ctx carries or in its own.
func (s *Store) insertNew(ctx context.Context, rows any, n int) (int, error) {
	var inserted int
	write := func(tx *gorm.DB) error {
		res := tx.Clauses(clause.OnConflict{DoNothing: true}).CreateInBatches(rows, 100)
		if res.Error != nil {
			return fmt.Errorf("store: unable to add %d notification rows: %w", n, res.Error)
		}
		inserted = int(res.RowsAffected)
		return nil
	}
	if tx := txFrom(ctx); tx != nil {
		return inserted, write(tx)
	}
	err := s.inTx(ctx, write)
	return inserted, err
}

// ListNotifications pages through a user's notifications newest first; the cursor encodes (created_at, id).
func (s *Store) ListNotifications(ctx context.Context, f model.NotificationFilter) ([]*model.Notification, string, error) {
	q := s.db.WithContext(ctx).Where("tenant_id = ? AND username = ?", f.TenantID, f.Username)
	if f.UnreadOnly {
		q = q.Where("read_at IS NULL")
	}
	if f.Page.Cursor != "" {
		at, id, err := decodeCursor(f.Page.Cursor)
		if err != nil {
			return nil, "", err
		}
		q = q.Where("(created_at < ? OR (created_at = ? AND id < ?))", at, at, id)
	}
	var rows []notificationRow
	if err := q.Order("created_at DESC, id DESC").Limit(f.Page.Limit + 1).Find(&rows).Error; err != nil {
		return nil, "", fmt.Errorf("store: unable to list notifications: %w", err)
	}
	next := ""
	if len(rows) > f.Page.Limit {
		rows = rows[:f.Page.Limit]
		next = encodeCursor(rows[len(rows)-1].CreatedAt, rows[len(rows)-1].ID)
	}
	out := make([]*model.Notification, len(rows))
	for i := range rows {
		out[i] = rows[i].toModel()
	}
	return out, next, nil
}

// CountUnread counts a user's unread notifications.
func (s *Store) CountUnread(ctx context.Context, tenant, username string) (int, error) {
	var n int64
	if err := s.db.WithContext(ctx).Model(&notificationRow{}).Where("tenant_id = ? AND username = ? AND read_at IS NULL", tenant, username).
		Count(&n).Error; err != nil {
		return 0, fmt.Errorf("store: unable to count notifications: %w", err)
	}
	return int(n), nil
}

// MarkNotificationRead marks one of the user's notifications read; ENOTFOUND when it is not theirs.
func (s *Store) MarkNotificationRead(ctx context.Context, tenant, username, id string, at time.Time) error {
	return s.inTx(ctx, func(tx *gorm.DB) error {
		var r notificationRow
		if err := tx.Where("tenant_id = ? AND username = ? AND id = ?", tenant, username, id).Take(&r).Error; err != nil {
			return notFound(err, "notification %q not found", id)
		}
		if r.ReadAt != nil {
			return nil
		}
		return tx.Model(&notificationRow{}).Where("id = ? AND read_at IS NULL", id).Update("read_at", at.UTC()).Error
	})
}

// MarkAllNotificationsRead marks every unread notification of the user read.
func (s *Store) MarkAllNotificationsRead(ctx context.Context, tenant, username string, at time.Time) (int, error) {
	res := s.db.WithContext(ctx).Model(&notificationRow{}).Where("tenant_id = ? AND username = ? AND read_at IS NULL", tenant, username).
		Update("read_at", at.UTC())
	if res.Error != nil {
		return 0, fmt.Errorf("store: unable to mark notifications read: %w", res.Error)
	}
	return int(res.RowsAffected), nil
}

// DueChannels lists the channels with deliveries due at now.
func (s *Store) DueChannels(ctx context.Context, now time.Time) ([][2]string, error) {
	var rows []struct{ TenantID, Channel string }
	if err := s.db.WithContext(ctx).Model(&notifyDeliveryRow{}).Distinct("tenant_id", "channel").
		Where("status = ? AND next_attempt_at <= ?", model.DeliveryPending, now.UTC()).Scan(&rows).Error; err != nil {
		return nil, fmt.Errorf("store: unable to look for due notification deliveries: %w", err)
	}
	out := make([][2]string, len(rows))
	for i, r := range rows {
		out[i] = [2]string{r.TenantID, r.Channel}
	}
	return out, nil
}

// rateWindow is the window of a channel's rate limit.
const rateWindow = time.Minute

// ClaimChannelDeliveries leases up to n due deliveries of a channel within its rate. The channel row is locked
// for the claim (FOR UPDATE on MySQL; SQLite serialises write transactions), so that replicas claiming the same
// channel take turns, read and extend one send log: together they never exceed perMinute sends in any minute.
func (s *Store) ClaimChannelDeliveries(ctx context.Context, tenant, channel string, n, perMinute int, now, leaseUntil time.Time) (*model.ChannelSend, error) {
	out := &model.ChannelSend{}
	err := s.inTxOpts(ctx, readCommitted, func(tx *gorm.DB) error {
		*out = model.ChannelSend{}
		var ch channelRow
		if err := tx.Clauses(s.lockClause()...).Where("tenant_id = ? AND name = ?", tenant, channel).Take(&ch).Error; err != nil {
			return notFound(err, "channel %q not found", channel)
		}
		out.Channel = ch.toModel()
		var sent []int64
		_ = json.Unmarshal([]byte(ch.SentLog), &sent) // a damaged log only forgets old sends
		from := now.Add(-rateWindow).UnixMilli()
		sent = slices.DeleteFunc(sent, func(ms int64) bool { return ms <= from })
		slices.Sort(sent)
		take := n
		if perMinute > 0 {
			take = min(n, perMinute-len(sent))
		}
		if take <= 0 {
			out.NextFree = time.UnixMilli(sent[len(sent)-perMinute]).Add(rateWindow).UTC()
			return nil
		}
		q := tx.Where("tenant_id = ? AND channel = ? AND status = ? AND next_attempt_at <= ?", tenant, channel, model.DeliveryPending, now.UTC()).
			Order("next_attempt_at, created_at, id").Limit(take)
		// The channel's lock already keeps other claims of it out; locking the rows read keeps out a late
		// FinishNotificationDelivery of an expired lease. The (tenant, channel, status, due) index makes the
		// scan touch this channel's rows only, so claims of other channels never wait on these.
		q = q.Clauses(s.lockClause()...)
		var rows []notifyDeliveryRow
		if err := q.Find(&rows).Error; err != nil {
			return fmt.Errorf("store: unable to read due deliveries of channel %s: %w", channel, err)
		}
		if len(rows) == 0 {
			return nil
		}
		ids := make([]string, len(rows))
		for i := range rows {
			ids[i] = rows[i].ID
		}
		if err := tx.Model(&notifyDeliveryRow{}).Where("id IN ?", ids).Updates(map[string]any{
			"attempts": gorm.Expr("attempts + 1"), "next_attempt_at": leaseUntil.UTC(), "last_attempt_at": now.UTC()}).Error; err != nil {
			return fmt.Errorf("store: unable to claim deliveries of channel %s: %w", channel, err)
		}
		for range rows {
			sent = append(sent, now.UnixMilli())
		}
		if perMinute > 0 {
			b, _ := json.Marshal(sent)
			if err := tx.Model(&channelRow{}).Where("tenant_id = ? AND name = ?", tenant, channel).Update("sent_log", string(b)).Error; err != nil {
				return fmt.Errorf("store: unable to record the sends of channel %s: %w", channel, err)
			}
			if len(sent) >= perMinute {
				out.NextFree = time.UnixMilli(sent[len(sent)-perMinute]).Add(rateWindow).UTC()
			}
		}
		at := now.UTC()
		for i := range rows {
			r := &rows[i]
			r.Attempts++
			r.NextAttemptAt = leaseUntil.UTC()
			r.LastAttemptAt = &at
			out.Deliveries = append(out.Deliveries, r.toModel())
		}
		return nil
	})
	return out, err
}

// FinishNotificationDelivery records an attempt's outcome unless the delivery moved on.
func (s *Store) FinishNotificationDelivery(ctx context.Context, r model.DeliveryResult) (bool, error) {
	next := r.NextAttemptAt
	if r.FinishedAt != nil {
		next = *r.FinishedAt
	}
	res := s.db.WithContext(ctx).Model(&notifyDeliveryRow{}).Where("id = ? AND status = ? AND attempts = ?", r.ID, model.DeliveryPending, r.Attempt).
		Updates(map[string]any{"status": r.Status, "last_error": r.Error, "next_attempt_at": next.UTC(), "finished_at": utcPtr(r.FinishedAt)})
	if res.Error != nil {
		return false, fmt.Errorf("store: unable to record notification delivery %s: %w", r.ID, res.Error)
	}
	return res.RowsAffected == 1, nil
}

// ListNotificationDeliveries pages through a tenant's delivery log newest first.
func (s *Store) ListNotificationDeliveries(ctx context.Context, tenant, status string, page model.Page) ([]*model.NotificationDelivery, string, error) {
	q := s.db.WithContext(ctx).Where("tenant_id = ?", tenant)
	if status != "" {
		q = q.Where("status = ?", status)
	}
	if page.Cursor != "" {
		at, id, err := decodeCursor(page.Cursor)
		if err != nil {
			return nil, "", err
		}
		q = q.Where("(created_at < ? OR (created_at = ? AND id < ?))", at, at, id)
	}
	var rows []notifyDeliveryRow
	if err := q.Order("created_at DESC, id DESC").Limit(page.Limit + 1).Find(&rows).Error; err != nil {
		return nil, "", fmt.Errorf("store: unable to list notification deliveries: %w", err)
	}
	next := ""
	if len(rows) > page.Limit {
		rows = rows[:page.Limit]
		next = encodeCursor(rows[len(rows)-1].CreatedAt, rows[len(rows)-1].ID)
	}
	out := make([]*model.NotificationDelivery, len(rows))
	for i := range rows {
		out[i] = rows[i].toModel()
	}
	return out, next, nil
}

// PendingTaskCounts counts the pending tasks of each assignee.
func (s *Store) PendingTaskCounts(ctx context.Context, tenant string) (map[string]int, error) {
	var rows []struct {
		Assignee string
		N        int
	}
	if err := s.conn(ctx).Model(&taskRow{}).Select("assignee, COUNT(*) AS n").Where("tenant_id = ? AND status = ?", tenant, model.TaskPending).
		Group("assignee").Scan(&rows).Error; err != nil {
		return nil, fmt.Errorf("store: unable to count pending tasks: %w", err)
	}
	out := make(map[string]int, len(rows))
	for _, r := range rows {
		out[r.Assignee] = r.N
	}
	return out, nil
}

// Users returns the tenant's users with these names.
func (s *Store) Users(ctx context.Context, tenant string, names []string) (map[string]*model.User, error) {
	out := map[string]*model.User{}
	for chunk := range slices.Chunk(names, 500) {
		var rows []userRow
		if err := s.conn(ctx).Where("tenant_id = ? AND username IN ?", tenant, chunk).Find(&rows).Error; err != nil {
			return nil, fmt.Errorf("store: unable to read users: %w", err)
		}
		for i := range rows {
			out[rows[i].Username] = rows[i].toModel()
		}
	}
	return out, nil
}
