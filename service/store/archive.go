package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tidwall/gjson"
	"gorm.io/gorm"

	"github.com/halley-bpm/halley/model"
)

// The retention sweep's side of the store (service/archive drives it): due instances by an index range per template
// version, an instance with everything that refers to it read as plain rows, and one transaction that leaves a
// tombstone and deletes those rows. Its write-ahead marker and leader lease are rows too, so the sweep's state
// lives where the data does.

// instanceTables are the tables whose rows belong to one instance, by an indexed instance_id column, with the
// order their rows are archived in. A table that gains an instance_id (a new per-instance concern) belongs here:
// the archive then keeps its rows and the sweep deletes them.
var instanceTables = []struct{ table, order string }{
	{"tasks", "id"},
	{"history", "seq"},
	{"bookmarks", "id"},
	{"timers", "id"},
	{"cc", "id"},
	{"plugin_runs", "id"},
	{"plugin_run_logs", "run_id, attempt"},
	{"subscription_deliveries", "id"},
	{"trigger_log", "seq"},
	{"idempotency_commits", "tenant_id, username, idem_key"},
	// Released when its instance ends; a claim an ended instance still holds (left by an older release) goes too,
	// or its correlation id could never be used again.
	{"running_correlations", "tenant_id, tkey, correlation_id"},
}

// Not here, on purpose: audit_log rows (their target may name an instance, but they are the audit: they stay, and
// HALLEY_AUDIT_RETENTION purges them) and message_receipts (keyed by message id, not by instance; purged after
// seven days).

// jsonColumns hold JSON documents: the archive embeds them as JSON rather than as strings.
var jsonColumns = map[string]bool{
	"instances.context": true, "instances.state": true, "tasks.data": true, "history.data": true, "bookmarks.payload": true,
	"timers.payload": true, "plugin_runs.input": true, "plugin_runs.output": true, "subscription_deliveries.body": true,
	"templates.draft": true, "template_versions.definition": true,
}

// Lease rows.

type leaseRow struct {
	Name      string `gorm:"primaryKey"`
	Owner     string
	Token     int64
	ExpiresAt time.Time
}

func (leaseRow) TableName() string { return "leases" }

var _ model.ArchiveStore = (*Store)(nil)

// errLeaseLost is returned when a fenced write finds that its lease has passed to another holder (or expired).
func errLeaseLost(l model.Lease) error {
	return model.CodedError(model.ECONFLICT, "lease_lost", "the %s lease of %s (token %d) was lost", l.Name, l.Owner, l.Token)
}

func (s *Store) lockLease(tx *gorm.DB, name string) (*leaseRow, error) {
	q := "SELECT name, owner, token, expires_at FROM leases WHERE name = ?"
	if s.dialect == MySQL {
		q += " FOR UPDATE"
	}
	var r leaseRow
	err := tx.Raw(q, name).Row().Scan(&r.Name, &r.Owner, &r.Token, &r.ExpiresAt)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("store: unable to read lease %s: %w", name, err)
	}
	return &r, nil
}

// AcquireLease implements model.ArchiveStore. The lease row is locked while it is read and changed, so two
// replicas asking at once never both get it; the token grows with every change of owner.
func (s *Store) AcquireLease(ctx context.Context, name, owner string, now, until time.Time) (model.Lease, bool, error) {
	var l model.Lease
	var ok bool
	err := s.inTx(ctx, func(tx *gorm.DB) error {
		l, ok = model.Lease{}, false
		r, err := s.lockLease(tx, name)
		if err != nil {
			return err
		}
		if r == nil {
			err := tx.Create(&leaseRow{Name: name, Owner: owner, Token: 1, ExpiresAt: until.UTC()}).Error
			if isDuplicate(err) {
				return nil // another replica created it first: theirs
			}
			if err != nil {
				return fmt.Errorf("store: unable to create lease %s: %w", name, err)
			}
			l, ok = model.Lease{Name: name, Owner: owner, Token: 1}, true
			return nil
		}
		if r.Owner != owner && r.ExpiresAt.After(now) {
			return nil
		}
		token := r.Token
		if r.Owner != owner {
			token++
		}
		if err := tx.Exec("UPDATE leases SET owner = ?, token = ?, expires_at = ? WHERE name = ?", owner, token, until.UTC(), name).Error; err != nil {
			return fmt.Errorf("store: unable to take lease %s: %w", name, err)
		}
		l, ok = model.Lease{Name: name, Owner: owner, Token: token}, true
		return nil
	})
	return l, ok, err
}

// ReleaseLease implements model.ArchiveStore.
func (s *Store) ReleaseLease(ctx context.Context, l model.Lease) error {
	err := s.db.WithContext(ctx).Exec("UPDATE leases SET expires_at = ? WHERE name = ? AND owner = ? AND token = ?",
		time.Unix(0, 0).UTC(), l.Name, l.Owner, l.Token).Error
	if err != nil {
		return fmt.Errorf("store: unable to release lease %s: %w", l.Name, err)
	}
	return nil
}

// checkLease fails with lease_lost unless l still holds its lease at now; it locks the lease row until the end of
// tx, so fenced transactions of one lease never interleave.
func (s *Store) checkLease(tx *gorm.DB, l model.Lease, now time.Time) error {
	r, err := s.lockLease(tx, l.Name)
	if err != nil {
		return err
	}
	if r == nil || r.Owner != l.Owner || r.Token != l.Token || !r.ExpiresAt.After(now) {
		return errLeaseLost(l)
	}
	return nil
}

// Finding due instances.

const (
	retentionGroupsSQL = "SELECT DISTINCT tenant_id, tkey, version FROM instances"
	dueInstancesSQL    = "SELECT id, ended_at FROM instances WHERE tenant_id = ? AND tkey = ? AND version = ? AND ended_at < ?" +
		" AND (ended_at > ? OR (ended_at = ? AND id > ?)) ORDER BY ended_at, id LIMIT ?"
)

// RetentionGroups implements model.ArchiveStore. On MySQL it is a loose index scan of idx_instances_retention
// (one probe per template version, whatever the number of instances).
func (s *Store) RetentionGroups(ctx context.Context) ([]model.RetentionGroup, error) {
	rows, err := s.sqlDB.QueryContext(ctx, retentionGroupsSQL)
	if err != nil {
		return nil, fmt.Errorf("store: unable to list template versions with instances: %w", err)
	}
	defer rows.Close()
	var out []model.RetentionGroup
	for rows.Next() {
		var g model.RetentionGroup
		if err := rows.Scan(&g.TenantID, &g.Template, &g.Version); err != nil {
			return nil, fmt.Errorf("store: unable to list template versions with instances: %w", err)
		}
		out = append(out, g)
	}
	return out, rows.Err()
}

// VersionRetention implements model.ArchiveStore.
func (s *Store) VersionRetention(ctx context.Context, tenant, key string, version int) (*time.Duration, error) {
	var def string
	err := s.sqlDB.QueryRowContext(ctx, "SELECT definition FROM template_versions WHERE tenant_id = ? AND tkey = ? AND version = ?", tenant, key, version).Scan(&def)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, model.CodedError(model.ENOTFOUND, "version_not_found", "template %s has no version %d", key, version)
	}
	if err != nil {
		return nil, fmt.Errorf("store: unable to read template %s version %d: %w", key, version, err)
	}
	v := gjson.Get(def, "options.retention")
	if !v.Exists() || v.Type == gjson.Null {
		return nil, nil
	}
	var d model.Duration
	if err := json.Unmarshal([]byte(v.Raw), &d); err != nil {
		return nil, fmt.Errorf("store: template %s version %d: options.retention: %w", key, version, err)
	}
	out := d.Std()
	return &out, nil
}

// DueInstances implements model.ArchiveStore: an index range of idx_instances_retention (running instances have
// no ended_at and are never in it). after pages through a group (ended_at, id); the zero value starts at its head.
func (s *Store) DueInstances(ctx context.Context, g model.RetentionGroup, endedBefore time.Time, after model.DueInstance, limit int) ([]model.DueInstance, error) {
	from := after.EndedAt.UTC()
	if from.IsZero() {
		from = time.Unix(0, 0).UTC() // before any instance ended; a zero date is not a valid DATETIME everywhere
	}
	rows, err := s.sqlDB.QueryContext(ctx, dueInstancesSQL, g.TenantID, g.Template, g.Version, endedBefore.UTC(), from, from, after.ID, limit)
	if err != nil {
		return nil, fmt.Errorf("store: unable to find instances to archive: %w", err)
	}
	defer rows.Close()
	var out []model.DueInstance
	for rows.Next() {
		var d model.DueInstance
		if err := rows.Scan(&d.ID, &d.EndedAt); err != nil {
			return nil, fmt.Errorf("store: unable to find instances to archive: %w", err)
		}
		d.EndedAt = d.EndedAt.UTC()
		out = append(out, d)
	}
	return out, rows.Err()
}

// The write-ahead marker.

// PendingArchiveBatch implements model.ArchiveStore. The table holds at most one row (a batch is deleted when it
// is done, and a sweep finishes a pending batch before it begins another).
func (s *Store) PendingArchiveBatch(ctx context.Context) (*model.ArchiveBatch, error) {
	var b model.ArchiveBatch
	var ids string
	err := s.sqlDB.QueryRowContext(ctx, "SELECT id, file, file_offset, instance_ids, created_at FROM archive_batches ORDER BY created_at, id LIMIT 1").
		Scan(&b.ID, &b.File, &b.Offset, &ids, &b.CreatedAt)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("store: unable to read the pending archive batch: %w", err)
	}
	if err := json.Unmarshal([]byte(ids), &b.InstanceIDs); err != nil {
		return nil, fmt.Errorf("store: archive batch %s: corrupt instance ids: %w", b.ID, err)
	}
	b.CreatedAt = b.CreatedAt.UTC()
	return &b, nil
}

// BeginArchiveBatch implements model.ArchiveStore.
func (s *Store) BeginArchiveBatch(ctx context.Context, l model.Lease, b *model.ArchiveBatch, now time.Time) error {
	ids, err := json.Marshal(b.InstanceIDs)
	if err != nil {
		return err
	}
	return s.inTx(ctx, func(tx *gorm.DB) error {
		if err := s.checkLease(tx, l, now); err != nil {
			return err
		}
		if err := tx.Exec("DELETE FROM archive_batches WHERE id = ?", b.ID).Error; err != nil {
			return fmt.Errorf("store: unable to store archive batch %s: %w", b.ID, err)
		}
		if err := tx.Exec("INSERT INTO archive_batches (id, file, file_offset, instance_ids, created_at) VALUES (?, ?, ?, ?, ?)",
			b.ID, b.File, b.Offset, string(ids), b.CreatedAt.UTC()).Error; err != nil {
			return fmt.Errorf("store: unable to store archive batch %s: %w", b.ID, err)
		}
		return nil
	})
}

// Reading an instance with everything that refers to it.

// LoadArchiveRecords implements model.ArchiveStore.
func (s *Store) LoadArchiveRecords(ctx context.Context, ids []string) ([]*model.ArchiveRecord, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	insts, err := s.loadRows(ctx, "instances", "id", ids, "id")
	if err != nil {
		return nil, err
	}
	recs := map[string]*model.ArchiveRecord{}
	var order []string
	hidden := map[string][]string{} // tenant → keys of linear templates among these instances
	for _, row := range insts {
		id, _ := row["id"].(string)
		ended, _ := row["ended_at"].(time.Time)
		rowStatus, _ := row["status"].(string)
		status := model.InstanceStatus(rowStatus)
		if status == model.StatusRunning || ended.IsZero() {
			continue // never archive a running instance
		}
		r := &model.ArchiveRecord{ID: id, Status: status, EndedAt: ended, Rows: map[string][]map[string]any{"instances": {row}}}
		r.TenantID, _ = row["tenant_id"].(string)
		r.Template, _ = row["tkey"].(string)
		v, _ := row["version"].(int64)
		r.Version = int(v)
		r.Rev, _ = row["rev"].(int64)
		recs[id] = r
		order = append(order, id)
		hidden[r.TenantID] = append(hidden[r.TenantID], r.Template)
	}
	if len(order) == 0 {
		return nil, nil
	}
	for _, t := range instanceTables {
		rows, err := s.loadRows(ctx, t.table, "instance_id", order, "instance_id, "+t.order)
		if err != nil {
			return nil, err
		}
		if t.table == "history" {
			if rows, err = expandHistoryRows(rows); err != nil {
				return nil, err
			}
		}
		for _, row := range rows {
			id, _ := row["instance_id"].(string)
			if r := recs[id]; r != nil {
				r.Rows[t.table] = append(r.Rows[t.table], row)
			}
		}
	}
	// A linear instance's hidden template is its own (one per instance): it goes with it.
	for tenant, keys := range hidden {
		tpls, err := s.loadRows(ctx, "templates", "tkey", keys, "tkey", "tenant_id = ? AND hidden = 1", tenant)
		if err != nil {
			return nil, err
		}
		if len(tpls) == 0 {
			continue
		}
		var hk []string
		for _, row := range tpls {
			k, _ := row["tkey"].(string)
			hk = append(hk, k)
		}
		vers, err := s.loadRows(ctx, "template_versions", "tkey", hk, "tkey, version", "tenant_id = ?", tenant)
		if err != nil {
			return nil, err
		}
		for _, id := range order {
			r := recs[id]
			if r.TenantID != tenant {
				continue
			}
			for _, row := range tpls {
				if row["tkey"] == r.Template {
					r.Rows["templates"] = append(r.Rows["templates"], row)
				}
			}
			for _, row := range vers {
				if row["tkey"] == r.Template {
					r.Rows["template_versions"] = append(r.Rows["template_versions"], row)
				}
			}
		}
	}
	out := make([]*model.ArchiveRecord, 0, len(order))
	for _, id := range order {
		r := recs[id]
		if activeRuns(r) {
			continue // a plugin run of it is still going: archive it at a later sweep
		}
		out = append(out, r)
	}
	return out, nil
}

// expandHistoryRows gives the archive one history entry per event, as it had before a step's events shared a row
// (history.go): a row's further events follow it with the row's seq, tenant and instance, and no entry has
// more_events.
func expandHistoryRows(rows []map[string]any) ([]map[string]any, error) {
	out := make([]map[string]any, 0, len(rows))
	for _, row := range rows {
		more, _ := row["more_events"].(string)
		if raw, ok := row["more_events"].(json.RawMessage); ok {
			more = string(raw)
		}
		delete(row, "more_events")
		out = append(out, row)
		if more == "" {
			continue
		}
		first := model.HistoryEvent{}
		first.At, _ = row["at"].(time.Time)
		first.Actor, _ = row["actor"].(string)
		first.InstanceID, _ = row["instance_id"].(string)
		first.Seq, _ = row["seq"].(int64)
		evs, err := ExpandHistory(first, more)
		if err != nil {
			return nil, err
		}
		for _, h := range evs[1:] {
			out = append(out, map[string]any{"seq": row["seq"], "tenant_id": row["tenant_id"], "instance_id": row["instance_id"],
				"at": h.At.UTC(), "actor": h.Actor, "action": h.Action, "node_id": h.NodeID, "task_id": h.TaskID, "comment": h.Comment,
				"data": h.Data})
		}
	}
	return out, nil
}

// activeRuns reports whether a record's instance has a plugin run that has not finished.
func activeRuns(r *model.ArchiveRecord) bool {
	for _, run := range r.Rows["plugin_runs"] {
		switch run["status"] {
		case model.RunQueued, model.RunRunning, model.RunWaiting:
			return true
		}
	}
	return false
}

// loadRows reads the rows of table whose column is one of vals (and which match the extra condition), every
// column as a plain value: strings, int64, float64, UTC times, nil, and JSON for the columns of jsonColumns.
func (s *Store) loadRows(ctx context.Context, table, column string, vals []string, order string, extra ...any) ([]map[string]any, error) {
	q := "SELECT * FROM " + table + " WHERE " + column + " IN (" + placeholders(len(vals)) + ")"
	args := strArgs(vals)
	if len(extra) > 0 {
		q += " AND " + extra[0].(string)
		args = append(args, extra[1:]...)
	}
	rows, err := s.sqlDB.QueryContext(ctx, q+" ORDER BY "+order, args...)
	if err != nil {
		return nil, fmt.Errorf("store: unable to read %s to archive: %w", table, err)
	}
	defer rows.Close()
	cols, err := rows.ColumnTypes()
	if err != nil {
		return nil, fmt.Errorf("store: unable to read %s to archive: %w", table, err)
	}
	var out []map[string]any
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, fmt.Errorf("store: unable to read %s to archive: %w", table, err)
		}
		m := make(map[string]any, len(cols))
		for i, c := range cols {
			name := strings.ToLower(c.Name())
			m[name] = plainValue(table+"."+name, c.DatabaseTypeName(), vals[i])
		}
		out = append(out, m)
	}
	return out, rows.Err()
}

// plainValue turns what a driver scanned into a value that reads the same from MySQL and SQLite.
func plainValue(column, dbType string, v any) any {
	switch x := v.(type) {
	case []byte:
		v = string(x)
	case time.Time:
		return x.UTC()
	case bool:
		if x {
			return int64(1)
		}
		return int64(0)
	}
	s, ok := v.(string)
	if !ok {
		return v
	}
	if strings.Contains(strings.ToUpper(dbType), "DATETIME") {
		for _, layout := range []string{"2006-01-02 15:04:05.999999999-07:00", "2006-01-02 15:04:05.999999", time.RFC3339Nano} {
			if t, err := time.Parse(layout, s); err == nil {
				return t.UTC()
			}
		}
	}
	if jsonColumns[column] && s != "" && json.Valid([]byte(s)) {
		return json.RawMessage(s)
	}
	return s
}

// Deleting what was archived.

// FinishArchiveBatch implements model.ArchiveStore.
func (s *Store) FinishArchiveBatch(ctx context.Context, l model.Lease, b *model.ArchiveBatch, recs []*model.ArchiveRecord, now time.Time) ([]string, error) {
	var changed []string
	// READ COMMITTED: the deletes lock the rows they delete and no gaps between them, so the engine's inserts of
	// new tasks, history and instances beside them never wait for the sweep.
	err := s.inTxOpts(ctx, readCommitted, func(tx *gorm.DB) error {
		changed = nil
		if err := s.checkLease(tx, l, now); err != nil {
			return err
		}
		ids := make([]string, len(recs))
		for i, r := range recs {
			ids[i] = r.ID
		}
		if len(ids) > 0 {
			var err error
			if changed, err = s.changedSince(tx, recs, ids); err != nil {
				return err
			}
			if len(changed) > 0 {
				return nil
			}
			if err := s.deleteArchived(tx, b, recs, ids, now); err != nil {
				return err
			}
		}
		if err := tx.Exec("DELETE FROM archive_batches WHERE id = ?", b.ID).Error; err != nil {
			return fmt.Errorf("store: unable to finish archive batch %s: %w", b.ID, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return changed, nil
}

// changedSince locks the records' instance rows and returns the ids of those that changed since they were read
// (an admin jumped a failed instance back to running) or gained a plugin run that is still going.
func (s *Store) changedSince(tx *gorm.DB, recs []*model.ArchiveRecord, ids []string) ([]string, error) {
	q := "SELECT id, rev, status, ended_at FROM instances WHERE id IN (" + placeholders(len(ids)) + ")"
	if s.dialect == MySQL {
		q += " FOR UPDATE"
	}
	rows, err := tx.Raw(q, strArgs(ids)...).Rows()
	if err != nil {
		return nil, fmt.Errorf("store: unable to lock instances to archive: %w", err)
	}
	type state struct {
		rev    int64
		status string
		ended  *time.Time
	}
	now := map[string]state{}
	for rows.Next() {
		var id string
		var st state
		if err := rows.Scan(&id, &st.rev, &st.status, &st.ended); err != nil {
			rows.Close()
			return nil, fmt.Errorf("store: unable to lock instances to archive: %w", err)
		}
		now[id] = st
	}
	rows.Close()
	var runs []string
	if err := tx.Raw("SELECT DISTINCT instance_id FROM plugin_runs WHERE instance_id IN ("+placeholders(len(ids))+") AND status IN (?, ?, ?)",
		append(strArgs(ids), model.RunQueued, model.RunRunning, model.RunWaiting)...).Scan(&runs).Error; err != nil {
		return nil, fmt.Errorf("store: unable to check plugin runs of instances to archive: %w", err)
	}
	busy := map[string]bool{}
	for _, id := range runs {
		busy[id] = true
	}
	var changed []string
	for _, r := range recs {
		st, ok := now[r.ID]
		if !ok || busy[r.ID] || st.rev != r.Rev || model.InstanceStatus(st.status) != r.Status || st.ended == nil || !st.ended.Equal(r.EndedAt) {
			changed = append(changed, r.ID)
		}
	}
	return changed, nil
}

func (s *Store) deleteArchived(tx *gorm.DB, b *model.ArchiveBatch, recs []*model.ArchiveRecord, ids []string, now time.Time) error {
	args := make([]any, 0, 9*len(recs))
	for _, r := range recs {
		args = append(args, r.ID, r.TenantID, r.Template, r.Version, r.Status, r.EndedAt.UTC(), now.UTC(), b.File, b.ID)
	}
	if err := tx.Exec("INSERT INTO archived_instances (id, tenant_id, tkey, version, status, ended_at, archived_at, file, batch_id) VALUES "+
		rowsOf(len(recs), 9), args...).Error; err != nil {
		return fmt.Errorf("store: unable to write tombstones: %w", err)
	}
	in := "(" + placeholders(len(ids)) + ")"
	for _, t := range instanceTables {
		if err := tx.Exec("DELETE FROM "+t.table+" WHERE instance_id IN "+in, strArgs(ids)...).Error; err != nil {
			return fmt.Errorf("store: unable to delete archived %s: %w", t.table, err)
		}
	}
	if err := tx.Exec("DELETE FROM instances WHERE id IN "+in, strArgs(ids)...).Error; err != nil {
		return fmt.Errorf("store: unable to delete archived instances: %w", err)
	}
	for _, r := range recs {
		if len(r.Rows["templates"]) == 0 {
			continue
		}
		if err := tx.Exec("DELETE FROM template_versions WHERE tenant_id = ? AND tkey = ?", r.TenantID, r.Template).Error; err != nil {
			return fmt.Errorf("store: unable to delete the template of linear instance %s: %w", r.ID, err)
		}
		if err := tx.Exec("DELETE FROM templates WHERE tenant_id = ? AND tkey = ? AND hidden = 1", r.TenantID, r.Template).Error; err != nil {
			return fmt.Errorf("store: unable to delete the template of linear instance %s: %w", r.ID, err)
		}
	}
	return nil
}

// Tombstones.

// GetArchived implements model.ArchiveStore. An empty tenant matches any (for operators' tools).
func (s *Store) GetArchived(ctx context.Context, tenant, id string) (*model.ArchivedInstance, error) {
	var a model.ArchivedInstance
	err := s.sqlDB.QueryRowContext(ctx, "SELECT id, tenant_id, tkey, version, status, ended_at, archived_at, file, batch_id FROM archived_instances WHERE id = ? AND (tenant_id = ? OR ? = '')", id, tenant, tenant).
		Scan(&a.ID, &a.TenantID, &a.Template, &a.Version, &a.Status, &a.EndedAt, &a.ArchivedAt, &a.File, &a.BatchID)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, model.CodedError(model.ENOTFOUND, "not_archived", "instance %q was not archived", id)
	}
	if err != nil {
		return nil, fmt.Errorf("store: unable to read tombstone of %s: %w", id, err)
	}
	a.EndedAt, a.ArchivedAt = a.EndedAt.UTC(), a.ArchivedAt.UTC()
	return &a, nil
}

// goneIfArchived turns the not-found error of an instance (or of something of an instance) into 410 archived when
// the instance was archived. Only a miss pays for the look-up.
func (s *Store) goneIfArchived(ctx context.Context, tenant, instanceID string, notFound error) error {
	if instanceID == "" || !model.IsKind(notFound, model.ENOTFOUND) {
		return notFound
	}
	a, err := s.GetArchived(ctx, tenant, instanceID)
	if err != nil {
		return notFound
	}
	return model.CodedError(model.EGONE, "archived", "instance %s was archived on %s (it ended %s); its record is in the archive (halley archive show %s)",
		a.ID, a.ArchivedAt.Format("2006-01-02"), a.EndedAt.Format("2006-01-02"), a.ID)
}

// sweepQueries are the sweep's statements for MaintenanceQueries (see purge.go).
func (s *Store) sweepQueries(now time.Time) []MaintenanceQuery {
	ids := []any{"inst-00007", "inst-00042"}
	in := "(" + placeholders(len(ids)) + ")"
	out := []MaintenanceQuery{
		{Name: "retention groups", SQL: retentionGroupsSQL},
		{Name: "due instances", SQL: dueInstancesSQL, Args: []any{model.DefaultTenant, "tkey-3", 1, now, time.Unix(0, 0).UTC(), time.Unix(0, 0).UTC(), "", 100}},
		{Name: "tombstone", SQL: "SELECT id FROM archived_instances WHERE id = ? AND tenant_id = ?", Args: []any{ids[0], model.DefaultTenant}},
		{Name: "delete archived instances", SQL: "DELETE FROM instances WHERE id IN " + in, Args: ids},
	}
	for _, t := range instanceTables {
		out = append(out,
			MaintenanceQuery{Name: "archive " + t.table, SQL: "SELECT * FROM " + t.table + " WHERE instance_id IN " + in + " ORDER BY instance_id, " + t.order, Args: ids},
			MaintenanceQuery{Name: "delete archived " + t.table, SQL: "DELETE FROM " + t.table + " WHERE instance_id IN " + in, Args: ids})
	}
	return out
}
