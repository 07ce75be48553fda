package store

import (
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/halley-bpm/halley/model"
)

type instanceRow struct {
	ID            string `gorm:"primaryKey"`
	TenantID      string
	Tkey          string
	Version       int
	Title         string
	TitleI18n     sql.NullString `gorm:"column:title_i18n"`
	Status        string
	Initiator     string
	CorrelationID string
	Context       string
	State         string
	Rev           int64
	CreatedAt     time.Time
	UpdatedAt     time.Time
	EndedAt       *time.Time
}

func (instanceRow) TableName() string { return "instances" }

// The instance state is encoded and decoded at every step, in the store's short form (state.go), with
// goccy/go-json, which reads and writes the same JSON as encoding/json at about twice its speed.
func toInstanceRow(i *model.Instance) (instanceRow, error) {
	st, err := encodeState(i)
	if err != nil {
		return instanceRow{}, fmt.Errorf("store: unable to encode state of instance %s: %w", i.ID, err)
	}
	ctx := string(i.Context)
	if ctx == "" {
		ctx = "{}"
	}
	var titles sql.NullString
	if len(i.TitleI18n) > 0 {
		b, err := json.Marshal(i.TitleI18n)
		if err != nil {
			return instanceRow{}, fmt.Errorf("store: unable to encode the titles of instance %s: %w", i.ID, err)
		}
		titles = sql.NullString{String: string(b), Valid: true}
	}
	return instanceRow{ID: i.ID, TenantID: i.TenantID, Tkey: i.Template, Version: i.Version, Title: i.Title, TitleI18n: titles, Status: string(i.Status),
		Initiator: i.Initiator, CorrelationID: i.CorrelationID, Context: ctx, State: string(st), Rev: i.Rev,
		CreatedAt: i.CreatedAt.UTC(), UpdatedAt: i.UpdatedAt.UTC(), EndedAt: utcPtr(i.EndedAt)}, nil
}

func (r *instanceRow) toModel(withState bool) (*model.Instance, error) {
	i := &model.Instance{ID: r.ID, TenantID: r.TenantID, Template: r.Tkey, Version: r.Version, Title: r.Title, Status: model.InstanceStatus(r.Status),
		Initiator: r.Initiator, CorrelationID: r.CorrelationID, Context: json.RawMessage(r.Context), Rev: r.Rev,
		CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(), EndedAt: utcPtr(r.EndedAt)}
	if r.TitleI18n.Valid && r.TitleI18n.String != "" {
		// Titles are labels: a row that does not read shows the plain title rather than failing the instance.
		_ = json.Unmarshal([]byte(r.TitleI18n.String), &i.TitleI18n)
	}
	if withState && r.State != "" {
		st, err := decodeState(r.ID, []byte(r.State))
		if err != nil {
			return nil, fmt.Errorf("store: corrupt state of instance %s: %w", r.ID, err)
		}
		i.State = st
	}
	return i, nil
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

type taskRow struct {
	ID             string `gorm:"primaryKey"`
	TenantID       string
	InstanceID     string
	NodeID         string
	NodeName       string
	NodeInstanceID string
	Assignee       string
	Status         string
	Kind           string
	Grp            int
	Position       int
	ParentID       string
	AfterSigners   string
	Comment        string
	Data           string
	DecidedBy      string
	Title          string
	Tkey           string
	Initiator      string
	CreatedAt      time.Time
	DecidedAt      *time.Time
	Auto           bool
	DelegatedFrom  string
	UrgedAt        *time.Time
}

func (taskRow) TableName() string { return "tasks" }

func toTaskRow(t *model.Task) taskRow {
	after := ""
	if len(t.AfterSigners) > 0 {
		after = strings.Join(t.AfterSigners, ",")
	}
	return taskRow{ID: t.ID, TenantID: t.TenantID, InstanceID: t.InstanceID, NodeID: t.NodeID, NodeName: t.NodeName, NodeInstanceID: t.NodeInstanceID,
		Assignee: t.Assignee, Status: string(t.Status), Kind: t.Kind, Grp: t.Group, Position: t.Position, ParentID: t.ParentID, AfterSigners: after,
		Comment: t.Comment, Data: string(t.Data), DecidedBy: t.DecidedBy, Title: t.Title, Tkey: t.Template, Initiator: t.Initiator,
		CreatedAt: t.CreatedAt.UTC(), DecidedAt: utcPtr(t.DecidedAt), Auto: t.Auto, DelegatedFrom: t.DelegatedFrom, UrgedAt: utcPtr(t.UrgedAt)}
}

func (r *taskRow) toModel() *model.Task {
	t := &model.Task{ID: r.ID, TenantID: r.TenantID, InstanceID: r.InstanceID, NodeID: r.NodeID, NodeName: r.NodeName, NodeInstanceID: r.NodeInstanceID,
		Assignee: r.Assignee, Status: model.TaskStatus(r.Status), Kind: r.Kind, Group: r.Grp, Position: r.Position, ParentID: r.ParentID, Comment: r.Comment,
		DecidedBy: r.DecidedBy, Title: r.Title, Template: r.Tkey, Initiator: r.Initiator, CreatedAt: r.CreatedAt.UTC(), DecidedAt: utcPtr(r.DecidedAt),
		Auto: r.Auto, DelegatedFrom: r.DelegatedFrom, UrgedAt: utcPtr(r.UrgedAt)}
	if r.AfterSigners != "" {
		t.AfterSigners = strings.Split(r.AfterSigners, ",")
	}
	if r.Data != "" {
		t.Data = json.RawMessage(r.Data)
	}
	return t
}

type bookmarkRow struct {
	ID             string `gorm:"primaryKey"`
	TenantID       string
	InstanceID     string
	NodeID         string
	NodeInstanceID string
	Kind           string
	Hash           string
	MessageName    string
	CorrelationID  string
	Payload        string
	CreatedAt      time.Time
	ClosedAt       *time.Time
}

func (bookmarkRow) TableName() string { return "bookmarks" }

func (r *bookmarkRow) toModel() *model.Bookmark {
	p := json.RawMessage(r.Payload)
	if r.Payload == "" {
		p = json.RawMessage("{}")
	}
	return &model.Bookmark{ID: r.ID, TenantID: r.TenantID, InstanceID: r.InstanceID, NodeID: r.NodeID, NodeInstanceID: r.NodeInstanceID,
		Kind: r.Kind, Hash: r.Hash, MessageName: r.MessageName, CorrelationID: r.CorrelationID, Payload: p, CreatedAt: r.CreatedAt.UTC(), ClosedAt: utcPtr(r.ClosedAt)}
}

type messageRow struct {
	ID            string `gorm:"primaryKey"`
	TenantID      string
	Name          string
	CorrelationID string
	Hash          string
	Data          string
	CreatedAt     time.Time
	ExpiresAt     time.Time
	ConsumedAt    *time.Time
}

func (messageRow) TableName() string { return "messages" }

type timerRow struct {
	ID             string `gorm:"primaryKey"`
	TenantID       string
	InstanceID     string
	NodeID         string
	NodeInstanceID string
	Kind           string
	DueAt          time.Time
	Status         string
	Payload        string
	CreatedAt      time.Time
	FiredAt        *time.Time
}

func (timerRow) TableName() string { return "timers" }

func (r *timerRow) toModel() *model.Timer {
	return &model.Timer{ID: r.ID, TenantID: r.TenantID, InstanceID: r.InstanceID, NodeID: r.NodeID, NodeInstanceID: r.NodeInstanceID, Kind: r.Kind,
		DueAt: r.DueAt.UTC(), Status: r.Status, Payload: json.RawMessage(r.Payload), CreatedAt: r.CreatedAt.UTC(), FiredAt: utcPtr(r.FiredAt)}
}

type outboxRow struct {
	Seq       int64 `gorm:"primaryKey;autoIncrement"`
	TenantID  string
	Kind      string
	Ref       string
	Payload   string
	CreatedAt time.Time
}

func (outboxRow) TableName() string { return "outbox" }

type ccRow struct {
	ID         string `gorm:"primaryKey"`
	TenantID   string
	InstanceID string
	NodeID     string
	Username   string
	CreatedAt  time.Time
	ReadAt     *time.Time
}

func (ccRow) TableName() string { return "cc" }

type pluginRunRow struct {
	ID             string `gorm:"primaryKey"`
	TenantID       string
	Plugin         string
	Version        int
	InstanceID     string
	NodeID         string
	NodeInstanceID string
	Phase          string
	Status         string
	Attempt        int
	ExitCode       *int
	Input          string
	Output         string
	Error          string
	Stdout         string
	Stderr         string
	LeaseOwner     string
	LeaseUntil     *time.Time
	CreatedAt      time.Time
	StartedAt      *time.Time
	EndedAt        *time.Time
	DurationMs     *int64
}

func (pluginRunRow) TableName() string { return "plugin_runs" }

var _ model.InstanceStore = (*Store)(nil)

const (
	instanceCols = "id, tenant_id, tkey, version, title, title_i18n, status, initiator, correlation_id, context, state, rev, created_at, updated_at, ended_at"
	taskCols     = "id, tenant_id, instance_id, node_id, node_name, node_instance_id, assignee, status, kind, grp, position, parent_id, " +
		"after_signers, comment, data, decided_by, title, tkey, initiator, created_at, decided_at, auto, delegated_from, urged_at"
	taskColsN = 24 // the columns of taskCols
	// instanceColsN is the number of columns of instanceCols.
	instanceColsN = 15
)

func scanInstance(rows *sql.Rows, r *instanceRow) error {
	var ended sql.NullTime
	err := rows.Scan(&r.ID, &r.TenantID, &r.Tkey, &r.Version, &r.Title, &r.TitleI18n, &r.Status, &r.Initiator, &r.CorrelationID, &r.Context, &r.State,
		&r.Rev, &r.CreatedAt, &r.UpdatedAt, &ended)
	if ended.Valid {
		t := ended.Time
		r.EndedAt = &t
	}
	return err
}

func scanTask(rows *sql.Rows, r *taskRow) error {
	var decided, urged sql.NullTime
	err := rows.Scan(&r.ID, &r.TenantID, &r.InstanceID, &r.NodeID, &r.NodeName, &r.NodeInstanceID, &r.Assignee, &r.Status, &r.Kind, &r.Grp,
		&r.Position, &r.ParentID, &r.AfterSigners, &r.Comment, &r.Data, &r.DecidedBy, &r.Title, &r.Tkey, &r.Initiator, &r.CreatedAt, &decided,
		&r.Auto, &r.DelegatedFrom, &urged)
	if decided.Valid {
		t := decided.Time
		r.DecidedAt = &t
	}
	if urged.Valid {
		t := urged.Time
		r.UrgedAt = &t
	}
	return err
}

func taskArgs(r *taskRow) []any {
	return []any{r.ID, r.TenantID, r.InstanceID, r.NodeID, r.NodeName, r.NodeInstanceID, r.Assignee, r.Status, r.Kind, r.Grp, r.Position, r.ParentID,
		r.AfterSigners, r.Comment, r.Data, r.DecidedBy, r.Title, r.Tkey, r.Initiator, r.CreatedAt, r.DecidedAt, r.Auto, r.DelegatedFrom, r.UrgedAt}
}

// CreateInstance writes a new instance and the work of its first step in one transaction.
func (s *Store) CreateInstance(ctx context.Context, w *model.Work) error {
	all := model.WithChildren([]*model.Work{w}) // with the children its first step started (subprocess nodes)
	var written map[string]instanceRow
	err := s.hotTx(ctx, func(tx *gorm.DB) error {
		args := make([]any, 0, instanceColsN*len(all))
		if s.cache != nil {
			written = make(map[string]instanceRow, len(all))
		}
		for _, x := range all {
			row, err := toInstanceRow(x.Instance)
			if err != nil {
				return err
			}
			args = append(args, instanceArgs(&row)...)
			if written != nil {
				written[row.ID] = row
			}
		}
		c, err := rawTx(tx)
		if err != nil {
			return err
		}
		b := &batch{dialect: s.dialect, block: s.blocks}
		b.add("INSERT INTO instances ("+instanceCols+") VALUES "+rowsOf(len(all), instanceColsN), args...)
		claimCorrelations(b, all...)
		return s.writeWorks(ctx, tx, c, b, all...)
	})
	if err == nil && txFrom(ctx) == nil {
		s.cache.keep(written, all)
	}
	return err
}

// claimCorrelations claims the correlation ids of new instances among the running instances of their templates:
// a taken one fails the batch on running_correlations' primary key (see correlationTaken).
func claimCorrelations(b *batch, creates ...*model.Work) {
	var args []any
	n := 0
	for _, w := range creates {
		if i := w.Instance; i.CorrelationID != "" {
			args = append(args, i.TenantID, i.Template, i.CorrelationID, i.ID)
			n++
		}
	}
	if n > 0 {
		b.add("INSERT INTO running_correlations (tenant_id, tkey, correlation_id, instance_id) VALUES "+rowsOf(n, 4), args...)
		b.claims = append(b.claims, creates...)
	}
}

// endedInStep reports an instance that ended in the step being written (finish sets EndedAt to the step's time,
// which is also its UpdatedAt), as opposed to one that had ended before (a late timer recorded on it).
func endedInStep(i *model.Instance) bool {
	return i.EndedAt != nil && i.EndedAt.Equal(i.UpdatedAt)
}

// correlationTaken answers a batch that failed on a unique key with the correlation id it claimed that another
// running instance holds (409 correlation_taken), or nil when no claim of creates is taken. It reads the latest
// committed rows (a locking read on MySQL).
func (s *Store) correlationTaken(ctx context.Context, c conn, creates []*model.Work) error {
	for _, w := range creates {
		i := w.Instance
		if i.CorrelationID == "" {
			continue
		}
		q := "SELECT instance_id FROM running_correlations WHERE tenant_id = ? AND tkey = ? AND correlation_id = ?"
		if s.dialect == MySQL {
			q += " LOCK IN SHARE MODE"
		}
		rows, err := c.QueryContext(ctx, q, i.TenantID, i.Template, i.CorrelationID)
		if err != nil {
			return err
		}
		var holder string
		if rows.Next() {
			err = rows.Scan(&holder)
		}
		rows.Close()
		if err != nil {
			return err
		}
		if holder != "" && holder != i.ID {
			return model.CodedError(model.ECONFLICT, "correlation_taken", "correlation id %q is taken by a running instance of template %q", i.CorrelationID, i.Template).
				WithDetails(map[string]any{"correlation_id": i.CorrelationID, "template": i.Template})
		}
	}
	return nil
}

func instanceArgs(r *instanceRow) []any {
	return []any{r.ID, r.TenantID, r.Tkey, r.Version, r.Title, r.TitleI18n, r.Status, r.Initiator, r.CorrelationID, r.Context, r.State, r.Rev, r.CreatedAt,
		r.UpdatedAt, r.EndedAt}
}

// UpdateInstance locks, loads, calls fn and writes back, in one transaction: UpdateInstances of one instance.
func (s *Store) UpdateInstance(ctx context.Context, tenant, id string, fn func(w *model.Work) error) error {
	u := &instancesTx{s: s, tenant: tenant, ids: []string{id}, fn: fn}
	if err := s.runInstancesTx(ctx, u); err != nil {
		return err
	}
	if err := u.out[id]; errors.Is(err, model.ErrNoInstance) {
		return s.goneIfArchived(ctx, tenant, id, err)
	}
	return u.out[id]
}

// runInstancesTx runs u on the instances' cached rows when the step cache has them all (stepcache.go), and on a
// locked read otherwise or when those rows turn out stale; then caches what it wrote.
func (s *Store) runInstancesTx(ctx context.Context, u *instancesTx) error {
	if s.cache != nil && txFrom(ctx) == nil {
		if u.cached = s.cache.all(u.tenant, u.ids); u.cached != nil {
			err := s.hotTx(ctx, u.run)
			if err == nil {
				s.cache.keep(u.written, u.saved)
				return nil
			}
			s.cache.evict(u.tenant, u.ids)
			if !errors.Is(err, errStaleCache) {
				return err
			}
			s.cache.stale.Add(1)
			u.cached = nil
		}
	}
	if err := s.hotTx(ctx, u.run); err != nil {
		s.cache.evict(u.tenant, u.ids)
		return err
	}
	if txFrom(ctx) == nil {
		s.cache.keep(u.written, u.saved)
	} else {
		s.cache.evict(u.tenant, u.ids) // the dispatch's transaction may still roll back
	}
	return nil
}

// noInstance is the ENOTFOUND of a step on an instance that does not exist; it wraps model.ErrNoInstance.
func noInstance(id string) error {
	return model.Errorf(model.ENOTFOUND, "instance %q not found", id).Wrapping(model.ErrNoInstance)
}

var _ model.BatchInstanceStore = (*Store)(nil)

// UpdateInstances implements model.BatchInstanceStore.
func (s *Store) UpdateInstances(ctx context.Context, tenant string, ids []string, fn func(w *model.Work) error, creates ...*model.Work) (map[string]error, error) {
	for _, w := range creates {
		if w.Instance.TenantID != tenant {
			return nil, fmt.Errorf("store: instance %s to create is of tenant %q, not %q", w.Instance.ID, w.Instance.TenantID, tenant)
		}
	}
	u := &instancesTx{s: s, tenant: tenant, ids: ids, fn: fn, creates: creates}
	if err := s.runInstancesTx(ctx, u); err != nil {
		return nil, err
	}
	return u.out, nil
}

// instancesTx is the transaction of UpdateInstance and UpdateInstances: lock the instances, run fn on each one
// found, write back the works fn accepted (and insert creates). hotTx runs it again after a deadlock.
type instancesTx struct {
	s       *Store
	tenant  string
	ids     []string
	fn      func(w *model.Work) error
	creates []*model.Work
	// cached, when set, are the instances' rows from the step cache: the transaction runs on them instead of a
	// locked read, and its first write checks them (stepcache.go).
	cached []*cachedWork
	out    map[string]error // each id's outcome, afresh for every attempt
	// written and saved are the instance rows written and the works they came from, for the step cache.
	written map[string]instanceRow
	saved   []*model.Work
}

func (u *instancesTx) run(tx *gorm.DB) error {
	u.out = make(map[string]error, len(u.ids))
	u.written, u.saved = nil, nil
	var (
		ws  []*model.Work
		err error
	)
	if u.cached != nil {
		ws, err = cachedWorks(u.cached)
	} else {
		ws, err = u.s.lockWorks(tx, u.tenant, u.ids)
	}
	if err != nil {
		return err
	}
	for _, id := range u.ids {
		u.out[id] = noInstance(id)
	}
	keep := ws[:0:0]
	for _, w := range ws {
		err := u.fn(w)
		u.out[w.Instance.ID] = err
		if err == nil {
			keep = append(keep, w)
		} else if u.cached != nil {
			return errStaleCache // decided on rows not read under the lock: decide it again on a locked read
		}
	}
	var revs map[string]int64
	if u.cached != nil {
		revs = make(map[string]int64, len(u.cached))
		for _, cw := range u.cached {
			revs[cw.inst.ID] = cw.inst.Rev
		}
	}
	if u.s.cache != nil {
		u.written = make(map[string]instanceRow, len(keep)+len(u.creates))
	}
	if err := u.s.saveWorks(tx, u.creates, revs, u.written, keep...); err != nil {
		return err
	}
	u.saved = append(append(u.saved, u.creates...), keep...)
	return nil
}

// lockWorks locks the instance rows with these ids (of one tenant) in id order, and loads each with its open
// tasks into a Work. Missing ids are left out. On MySQL the lock and the task read are one round trip.
func (s *Store) lockWorks(tx *gorm.DB, tenant string, ids []string) ([]*model.Work, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	ctx := tx.Statement.Context
	c, err := rawTx(tx)
	if err != nil {
		return nil, err
	}
	in := placeholders(len(ids))
	lockQ := "SELECT " + instanceCols + " FROM instances WHERE id IN (" + in + ") AND tenant_id = ? ORDER BY id"
	taskQ := "SELECT " + taskCols + " FROM " + useIndex(s.dialect, "tasks", "idx_tasks_instance") + " WHERE instance_id IN (" + in + ") AND status IN (?, ?) ORDER BY id"
	lockArgs := append(strArgs(ids), tenant)
	taskArgs := append(strArgs(ids), string(model.TaskPending), string(model.TaskWaiting))
	var rows *sql.Rows
	if s.dialect == MySQL {
		// The task read runs after the lock is granted, so it sees what the previous holder committed.
		rows, err = c.QueryContext(ctx, lockQ+" FOR UPDATE;\n"+taskQ, append(lockArgs, taskArgs...)...)
	} else {
		rows, err = c.QueryContext(ctx, lockQ, lockArgs...)
	}
	if err != nil {
		return nil, fmt.Errorf("store: unable to lock instances: %w", err)
	}
	defer rows.Close()
	var ws []*model.Work
	byID := make(map[string]*model.Work, len(ids))
	for rows.Next() {
		var r instanceRow
		if err := scanInstance(rows, &r); err != nil {
			return nil, fmt.Errorf("store: unable to read instance: %w", err)
		}
		inst, err := r.toModel(true)
		if err != nil {
			return nil, err
		}
		w := &model.Work{Instance: inst, Tasks: []*model.Task{}, ChangedTasks: map[string]*model.Task{}}
		ws = append(ws, w)
		byID[inst.ID] = w
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: unable to lock instances: %w", err)
	}
	if s.dialect == MySQL {
		if !rows.NextResultSet() {
			return nil, fmt.Errorf("store: unable to load open tasks: %w", rows.Err())
		}
	} else {
		rows.Close()
		if len(ws) == 0 {
			return nil, nil
		}
		if rows, err = c.QueryContext(ctx, taskQ, taskArgs...); err != nil {
			return nil, fmt.Errorf("store: unable to load open tasks: %w", err)
		}
		defer rows.Close()
	}
	for rows.Next() {
		var r taskRow
		if err := scanTask(rows, &r); err != nil {
			return nil, fmt.Errorf("store: unable to read task: %w", err)
		}
		if w := byID[r.InstanceID]; w != nil { // an id of another tenant has no work
			w.Tasks = append(w.Tasks, r.toModel())
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: unable to load open tasks: %w", err)
	}
	return ws, nil
}

// saveWorks inserts the instances of creates, writes back the instance rows of works loaded by lockWorks, and
// everything else all of them changed, the rows of every work together (one multi-row statement per kind).
// With revs (works that ran on cached rows: instance id → cached rev), the instance rows are written first, each
// only if its rev is still the cached one, and errStaleCache is returned when one was not. written, when not
// nil, receives the instance rows written.
func (s *Store) saveWorks(tx *gorm.DB, creates []*model.Work, revs map[string]int64, written map[string]instanceRow, ws ...*model.Work) error {
	if len(ws) == 0 && len(creates) == 0 {
		return nil
	}
	c, err := rawTx(tx)
	if err != nil {
		return err
	}
	// The instances the steps started (subprocess nodes) are inserted like creates.
	var started []*model.Work
	for _, w := range creates {
		started = append(started, model.WithChildren(w.Children)...)
	}
	for _, w := range ws {
		started = append(started, model.WithChildren(w.Children)...)
	}
	if len(started) > 0 {
		creates = append(creates[:len(creates):len(creates)], started...)
	}
	b := &batch{dialect: s.dialect, block: s.blocks}
	if len(creates) > 0 {
		args := make([]any, 0, instanceColsN*len(creates))
		for _, w := range creates {
			r, err := toInstanceRow(w.Instance)
			if err != nil {
				return err
			}
			args = append(args, instanceArgs(&r)...)
			if written != nil {
				written[r.ID] = r
			}
		}
		b.add("INSERT INTO instances ("+instanceCols+") VALUES "+rowsOf(len(creates), instanceColsN), args...)
		claimCorrelations(b, creates...)
	}
	if len(ws) > 0 && revs != nil {
		rows := make([]instanceRow, 0, len(ws))
		for _, w := range ws {
			r, err := toInstanceRow(w.Instance)
			if err != nil {
				return err
			}
			if r.Rev == revs[r.ID] {
				return errStaleCache // a write that does not raise the rev could not be told from the cached row
			}
			rows = append(rows, r)
			if written != nil {
				written[r.ID] = r
			}
		}
		if q, args, ok := checkedUpsert(rows, revs); ok && s.dialect == MySQL && !checksRuns(ws) {
			// With the rest of the step's writes and its commit: one round trip, the guard after it failing the
			// batch (and so the commit) unless every row was as cached.
			b.add(q, args...)
			b.add(checkedGuardSQL, 2*len(rows))
		} else if ok {
			res, err := c.ExecContext(tx.Statement.Context, q, args...)
			if err != nil {
				return fmt.Errorf("store: unable to write instances: %w", err)
			}
			if n, err := res.RowsAffected(); err != nil || n != int64(2*len(rows)) {
				return errStaleCache
			}
		} else {
			for part := range slices.Chunk(rows, checkedRows) {
				q, args := checkedUpdate(ws[0].Instance.TenantID, part, revs)
				res, err := c.ExecContext(tx.Statement.Context, q, args...)
				if err != nil {
					return fmt.Errorf("store: unable to write instances: %w", err)
				}
				if n, err := res.RowsAffected(); err != nil || n != int64(len(part)) {
					return errStaleCache
				}
			}
		}
	} else if len(ws) > 0 {
		// The locked rows of every work in one statement: an upsert whose insert never happens (the rows exist
		// and are locked) updates them all at once.
		args := make([]any, 0, instanceColsN*len(ws))
		for _, w := range ws {
			r, err := toInstanceRow(w.Instance)
			if err != nil {
				return err
			}
			args = append(args, instanceArgs(&r)...)
			if written != nil {
				written[r.ID] = r
			}
		}
		b.add("INSERT INTO instances ("+instanceCols+") VALUES "+rowsOf(len(ws), instanceColsN)+
			upsertSuffix(s.dialect, "title", "title_i18n", "status", "context", "state", "rev", "updated_at", "ended_at", "correlation_id"), args...)
	}
	return s.writeWorks(tx.Statement.Context, tx, c, b, append(creates[:len(creates):len(creates)], ws...)...)
}

// writeWorks adds what the works changed besides their instance rows to b, each kind in one multi-row statement,
// sends b, then runs the writes whose results decide whether the step holds (consumed messages, plugin results).
func (s *Store) writeWorks(ctx context.Context, tx *gorm.DB, c conn, b *batch, ws ...*model.Work) error {
	now := s.now()
	var (
		newTasks  []any
		nNew      int
		changed   []*model.Task
		history   []any
		nHist     int
		bookmarks []any
		nBook     int
		closeBM   []string
		timers    []any
		nTimer    int
		cancelT   []string
		firedT    []string
		consume   []string
		ccs       []any
		nCC       int
		runs      []any
		nRun      int
		runLogs   []any
		nRunLog   int
		checked   []model.RunUpdate
		closeRuns []model.RunUpdate
		outbox    []any
		nOut      int
		notes     []any
		nNote     int
		notesOut  []any
		nNoteOut  int
		fences    []*model.IdempotencyFence
		fenceArgs []any
		audits    []any
		nAudit    int
		released  []any
		nRelease  int
	)
	for _, w := range ws {
		if i := w.Instance; i.CorrelationID != "" && i.Ended() && endedInStep(i) {
			released = append(released, i.TenantID, i.Template, i.CorrelationID, i.ID)
			nRelease++
		}
		isNew := make(map[string]bool, len(w.NewTasks))
		for _, t := range w.NewTasks {
			r := toTaskRow(t)
			newTasks = append(newTasks, taskArgs(&r)...)
			nNew++
			isNew[t.ID] = true
		}
		ids := make([]string, 0, len(w.ChangedTasks))
		for id := range w.ChangedTasks {
			if !isNew[id] { // a task created in this step is written once, in its final form
				ids = append(ids, id)
			}
		}
		sort.Strings(ids)
		for _, id := range ids {
			changed = append(changed, w.ChangedTasks[id])
		}
		if len(w.History) > 0 { // one row a step (history.go)
			h, more, err := packHistory(w.History)
			if err != nil {
				return err
			}
			history = append(history, w.Instance.TenantID, w.Instance.ID, h.At.UTC(), h.Actor, h.Action, h.NodeID, h.TaskID, h.Comment, historyData(h.Data), more)
			nHist++
		}
		for _, bm := range w.NewBookmarks {
			p := string(bm.Payload)
			if p == "" {
				p = "{}"
			}
			bookmarks = append(bookmarks, bm.ID, bm.TenantID, bm.InstanceID, bm.NodeID, bm.NodeInstanceID, bm.Kind, bm.Hash, bm.MessageName,
				bm.CorrelationID, p, bm.CreatedAt.UTC(), nil)
			nBook++
		}
		closeBM = append(closeBM, w.CloseBookmarks...)
		for _, t := range w.NewTimers {
			p := string(t.Payload)
			if p == "" {
				p = "{}"
			}
			timers = append(timers, t.ID, t.TenantID, t.InstanceID, t.NodeID, t.NodeInstanceID, t.Kind, t.DueAt.UTC(), model.TimerPending, p, now, nil)
			nTimer++
		}
		cancelT = append(cancelT, w.CancelTimers...)
		firedT = append(firedT, w.FiredTimers...)
		consume = append(consume, w.ConsumeMessage...)
		for _, cc := range w.CC {
			ccs = append(ccs, cc.ID, cc.TenantID, cc.InstanceID, cc.NodeID, cc.Username, cc.CreatedAt.UTC(), nil)
			nCC++
		}
		for _, r := range w.NewPluginRuns {
			// A run handed to this process's executor is written leased (running, lease_owner, lease_until,
			// started_at); any other run is queued for a claim.
			runs = append(runs, r.ID, r.TenantID, r.Plugin, r.Version, r.InstanceID, r.NodeID, r.NodeInstanceID, r.Phase, r.Status, r.Attempt,
				string(r.Input), "", "", "", "", r.LeaseOwner, utcPtr(r.LeaseUntil), utcPtr(r.StartedAt), r.CreatedAt.UTC())
			nRun++
		}
		for _, u := range w.RunUpdates {
			if u.Close {
				closeRuns = append(closeRuns, u)
			} else {
				checked = append(checked, u)
			}
		}
		for _, l := range w.RunLogs {
			created := l.CreatedAt
			if created.IsZero() {
				created = now
			}
			runLogs = append(runLogs, l.RunID, l.Attempt, l.TenantID, l.Plugin, l.InstanceID, l.Record, created.UTC())
			nRunLog++
		}
		if a := w.Audit; a != nil {
			audits = append(audits, auditArgs(a, now)...)
			nAudit++
		}
		if f := w.Fence; f != nil {
			fences = append(fences, f)
			fenceArgs = append(fenceArgs, f.TenantID, f.Username, f.Key, w.Instance.ID, now)
		}
		for _, o := range w.Outbox {
			p := string(o.Payload)
			if p == "" {
				p = "{}"
			}
			outbox = append(outbox, o.TenantID, o.Kind, o.Ref, p, now)
			nOut++
		}
		for _, n := range w.Notifications {
			notes = append(notes, notificationArgs(n)...)
			nNote++
		}
		for _, d := range w.NotificationDeliveries {
			notesOut = append(notesOut, deliveryArgs(d)...)
			nNoteOut++
		}
	}
	if len(changed) > 0 {
		// Changed tasks (of locked instances) in one upsert, as for the instance rows, and the new tasks in the
		// same statement (an approval's decided task and its successor: one statement a step, not two). A new
		// task's id is new (numbered from its locked instance's seq), so its row is inserted.
		args := make([]any, 0, len(newTasks)+taskColsN*len(changed))
		args = append(args, newTasks...)
		for _, t := range changed {
			r := toTaskRow(t)
			args = append(args, taskArgs(&r)...)
		}
		b.addRows("INSERT INTO tasks ("+taskCols+")", taskColsN,
			upsertSuffix(s.dialect, "status", "comment", "data", "decided_by", "after_signers", "assignee", "decided_at", "auto", "urged_at"), args)
	} else if nNew > 0 {
		b.addRows("INSERT INTO tasks ("+taskCols+")", taskColsN, "", newTasks)
	}
	if nHist > 0 {
		b.addRows("INSERT INTO history (tenant_id, instance_id, at, actor, action, node_id, task_id, comment, data, more_events)", 10, "", history)
	}
	if nBook > 0 {
		b.add("INSERT INTO bookmarks (id, tenant_id, instance_id, node_id, node_instance_id, kind, hash, message_name, correlation_id, payload, created_at, closed_at) VALUES "+
			rowsOf(nBook, 12), bookmarks...)
	}
	// Closed after the inserts: a bookmark may be opened and closed in one step.
	//
	// The WHERE clauses of the updates below name only the node visits or ids: a condition on closed_at or status
	// there lets the optimizer pick idx_bookmarks_closed or idx_timers_pending and walk every open bookmark or pending
	// timer of the table once per statement (a storm of 30,000 fires read 3.5 million bookmark rows that way). The
	// conditions are in SET instead, so that a row already closed, fired or cancelled keeps its values; the rows are
	// those of the locked instances, so no other step waits on them.
	if len(closeBM) > 0 {
		b.add("UPDATE "+useIndex(s.dialect, "bookmarks", "idx_bookmarks_node")+" SET closed_at = COALESCE(closed_at, ?) WHERE node_instance_id IN ("+placeholders(len(closeBM))+")",
			append([]any{now}, strArgs(closeBM)...)...)
	}
	if nTimer > 0 {
		// A re-armed timer (same id) replaces its row. An upsert, not delete-then-insert: deleting ids that do not
		// exist takes InnoDB gap locks, and concurrent steps (time-ordered ids land in one gap) deadlock on them.
		b.add("INSERT INTO timers (id, tenant_id, instance_id, node_id, node_instance_id, kind, due_at, status, payload, created_at, fired_at) VALUES "+
			rowsOf(nTimer, 11)+upsertSuffix(s.dialect, "tenant_id", "instance_id", "node_id", "node_instance_id", "kind", "due_at", "status", "payload",
			"created_at", "fired_at"), timers...)
	}
	// Cancelled after the inserts: a timer may be armed and cancelled in one step.
	if len(cancelT) > 0 {
		b.add("UPDATE "+useIndex(s.dialect, "timers", "idx_timers_of_node")+" SET status = CASE WHEN status = ? THEN ? ELSE status END WHERE node_instance_id IN ("+placeholders(len(cancelT))+")",
			append([]any{model.TimerPending, model.TimerCancelled}, strArgs(cancelT)...)...)
	}
	if len(firedT) > 0 {
		// fired_at first: MySQL evaluates the assignments left to right, each seeing the ones before it.
		b.add("UPDATE "+useIndex(s.dialect, "timers", "PRIMARY")+" SET fired_at = CASE WHEN status = ? THEN ? ELSE fired_at END, status = CASE WHEN status = ? THEN ? ELSE status END WHERE id IN ("+
			placeholders(len(firedT))+")",
			append([]any{model.TimerPending, now, model.TimerPending, model.TimerFired}, strArgs(firedT)...)...)
	}
	if nCC > 0 {
		b.add("INSERT INTO cc (id, tenant_id, instance_id, node_id, username, created_at, read_at) VALUES "+rowsOf(nCC, 7), ccs...)
	}
	if nRun > 0 {
		b.add("INSERT INTO plugin_runs (id, tenant_id, plugin, version, instance_id, node_id, node_instance_id, phase, status, attempt, input, "+
			"output, error, stdout, stderr, lease_owner, lease_until, started_at, created_at) VALUES "+rowsOf(nRun, 19), runs...)
	}
	for _, u := range closeRuns {
		// Closing runs (timed out, cancelled) checks nothing: a run finished meanwhile is left as it is.
		q, args := runCloseStmt(u)
		b.add(q, args...)
	}
	if nRunLog > 0 {
		b.addRows("INSERT INTO plugin_run_logs (run_id, attempt, tenant_id, plugin, instance_id, record, created_at)", 7,
			ignoreDuplicateRunLogs(s.dialect), runLogs)
	}
	if nOut > 0 {
		b.add("INSERT INTO outbox (tenant_id, kind, ref, payload, created_at) VALUES "+rowsOf(nOut, 5), outbox...)
	}
	if nNote > 0 {
		b.addRows("INSERT INTO notifications ("+notificationCols+")", notificationColsN, ignoreDuplicates(s.dialect), notes)
	}
	if nNoteOut > 0 {
		b.addRows("INSERT INTO notification_deliveries ("+deliveryCols+")", deliveryColsN, ignoreDuplicates(s.dialect), notesOut)
	}
	if nRelease > 0 {
		// The correlation ids of instances that ended are free again (after the claims: an instance may start
		// and end in one step). Only the holder's claim is deleted: of instances that shared an id before ids
		// were claimed, the others hold none.
		b.add("DELETE FROM running_correlations WHERE "+
			strings.TrimSuffix(strings.Repeat("(tenant_id = ? AND tkey = ? AND correlation_id = ? AND instance_id = ?) OR ", nRelease), " OR "), released...)
	}
	if nAudit > 0 {
		b.add("INSERT INTO audit_log ("+auditCols+") VALUES "+rowsOf(nAudit, 11), audits...)
	}
	if len(fences) > 0 {
		// The fence: a second commit of the same key's work fails on the primary key, and the step with it.
		b.add("INSERT INTO idempotency_commits (tenant_id, username, idem_key, instance_id, created_at) VALUES "+rowsOf(len(fences), 5), fenceArgs...)
	}
	// Plugin results first: each must find its run still running, or the step does not hold (ECONFLICT). The
	// instance is locked already, so the order of the run's row lock is the same as before: instance, then run.
	for _, u := range checked {
		if err := applyRunUpdateRaw(ctx, c, u); err != nil {
			return err
		}
	}
	if h, ok := c.(*hotConn); ok && len(consume) == 0 {
		b.commit = h // nothing below: the writes and the commit go together
	}
	if err := b.exec(ctx, c); err != nil {
		if isGuardFailed(err) {
			return errStaleCache
		}
		if len(fences) > 0 && isDuplicate(err) {
			if taken, ferr := s.fencesTaken(ctx, c, fences); ferr == nil && taken {
				return model.ErrIdempotencyCommitted
			}
		}
		if isDuplicate(err) {
			if cerr := s.correlationTaken(ctx, c, b.claims); cerr != nil {
				return cerr
			}
		}
		return fmt.Errorf("store: unable to write the step: %w", err)
	}
	if len(consume) > 0 {
		res, err := c.ExecContext(ctx, "UPDATE messages SET consumed_at = ? WHERE id IN ("+placeholders(len(consume))+") AND consumed_at IS NULL",
			append([]any{now}, strArgs(consume)...)...)
		if err != nil {
			return fmt.Errorf("store: unable to consume messages: %w", err)
		}
		if n, _ := res.RowsAffected(); n != int64(len(consume)) {
			// Another step consumed it first: this one runs again and no longer finds it.
			return model.ErrStaleRead
		}
	}
	return nil
}

// fencesTaken reports whether the work of one of the fences' keys was committed before (by another request),
// and marks those fences. It reads the latest committed rows (a locking read on MySQL), not the transaction's
// snapshot.
func (s *Store) fencesTaken(ctx context.Context, c conn, fences []*model.IdempotencyFence) (bool, error) {
	q := "SELECT tenant_id, username, idem_key FROM idempotency_commits WHERE " +
		strings.TrimSuffix(strings.Repeat("(tenant_id = ? AND username = ? AND idem_key = ?) OR ", len(fences)), " OR ")
	args := make([]any, 0, 3*len(fences))
	for _, f := range fences {
		args = append(args, f.TenantID, f.Username, f.Key)
	}
	if s.dialect == MySQL {
		q += " LOCK IN SHARE MODE"
	}
	rows, err := c.QueryContext(ctx, q, args...)
	if err != nil {
		return false, err
	}
	defer rows.Close()
	taken := false
	for rows.Next() {
		var tenant, user, key string
		if err := rows.Scan(&tenant, &user, &key); err != nil {
			return false, err
		}
		for _, f := range fences {
			if f.TenantID == tenant && f.Username == user && f.Key == key {
				f.Conflict()
				taken = true
			}
		}
	}
	return taken, rows.Err()
}

// ignoreDuplicateRunLogs leaves out a run log record whose (run_id, attempt) exists: a completion retried after its
// commit, or a record the executor wrote on its own first.
func ignoreDuplicateRunLogs(dialect string) string {
	if dialect == MySQL {
		return " ON DUPLICATE KEY UPDATE run_id = run_id"
	}
	return " ON CONFLICT DO NOTHING"
}

// GetInstance reads an instance and all its tasks (oldest first).
func (s *Store) GetInstance(ctx context.Context, tenant, id string) (*model.Instance, []*model.Task, error) {
	var row instanceRow
	db := s.db.WithContext(ctx)
	if err := db.Where("id = ? AND tenant_id = ?", id, tenant).Take(&row).Error; err != nil {
		return nil, nil, s.goneIfArchived(ctx, tenant, id, notFound(err, "instance %q not found", id))
	}
	inst, err := row.toModel(true)
	if err != nil {
		return nil, nil, err
	}
	var trows []taskRow
	if err := db.Where("instance_id = ?", id).Order("created_at, LENGTH(id), id").Find(&trows).Error; err != nil {
		return nil, nil, fmt.Errorf("store: unable to load tasks of instance %s: %w", id, err)
	}
	tasks := make([]*model.Task, len(trows))
	for i := range trows {
		tasks[i] = trows[i].toModel()
	}
	return inst, tasks, nil
}

// ListInstances lists instances newest first (ids are time-ordered UUIDv7).
func (s *Store) ListInstances(ctx context.Context, f model.InstanceFilter) ([]*model.Instance, string, error) {
	var rows []instanceRow
	if err := s.instancesQuery(s.db.WithContext(ctx), f).Find(&rows).Error; err != nil {
		return nil, "", fmt.Errorf("store: unable to list instances: %w", err)
	}
	next := ""
	if len(rows) > f.Page.Limit {
		rows = rows[:f.Page.Limit]
		next = rows[len(rows)-1].ID
	}
	out := make([]*model.Instance, len(rows))
	for i := range rows {
		out[i], _ = rows[i].toModel(false)
	}
	return out, next, nil
}

// instancesQuery is ListInstances' query. On MySQL it names the index of its most selective equality filter whose
// index ends in the id (initiator, template, then status): MariaDB otherwise reads such an index by its equality
// prefix alone (a ref), from the newest entry down to the cursor, so that a page deep in a long list read every
// entry before it — in a table of 200,000 instances, 50,020 entries and their rows for a page of 21 in the middle
// (docs/benchmarks.md "The re-arm pass"). No hint with a correlation id (its index is more selective than any of
// them) or for a user's own view (VisibleTo: its subqueries may drive the read through the primary key).
func (s *Store) instancesQuery(db *gorm.DB, f model.InstanceFilter) *gorm.DB {
	q := db.Omit("state")
	if s.dialect == MySQL && f.CorrelationID == "" && f.VisibleTo == "" {
		switch {
		case f.Initiator != "":
			q = q.Table(useIndex(s.dialect, "instances", "idx_instances_initiator"))
		case f.Template != "":
			q = q.Table(useIndex(s.dialect, "instances", "idx_instances_template"))
		case f.Status != "":
			q = q.Table(useIndex(s.dialect, "instances", "idx_instances_status"))
		}
	}
	q = q.Where("tenant_id = ?", f.TenantID)
	if f.Status != "" {
		q = q.Where("status = ?", string(f.Status))
	}
	if f.Template != "" {
		q = q.Where("tkey = ?", f.Template)
	}
	if f.Initiator != "" {
		q = q.Where("initiator = ?", f.Initiator)
	}
	if f.CorrelationID != "" {
		q = q.Where("correlation_id = ?", f.CorrelationID)
	}
	if f.VisibleTo != "" {
		q = q.Where("(initiator = ? OR id IN (SELECT instance_id FROM tasks WHERE tenant_id = ? AND assignee = ?) OR id IN (SELECT instance_id FROM cc WHERE tenant_id = ? AND username = ?))",
			f.VisibleTo, f.TenantID, f.VisibleTo, f.TenantID, f.VisibleTo)
	}
	if f.Page.Cursor != "" {
		q = q.Where("id < ?", f.Page.Cursor)
	}
	return q.Order("id DESC").Limit(f.Page.Limit + 1)
}

// instanceOfTask returns the instance id in a task id (<instance id>.t<n>), or "".
func instanceOfTask(id string) string {
	if i := strings.LastIndexByte(id, '.'); i > 0 {
		return id[:i]
	}
	return ""
}

// GetTask returns ENOTFOUND for an unknown task, EGONE (archived) for a task of an archived instance.
func (s *Store) GetTask(ctx context.Context, tenant, id string) (*model.Task, error) {
	var r taskRow
	if err := s.db.WithContext(ctx).Where("id = ? AND tenant_id = ?", id, tenant).Take(&r).Error; err != nil {
		return nil, s.goneIfArchived(ctx, tenant, instanceOfTask(id), notFound(err, "task %q not found", id))
	}
	return r.toModel(), nil
}

// ListTasks lists tasks oldest first; the cursor encodes (created_at, id).
func (s *Store) ListTasks(ctx context.Context, f model.TaskFilter) ([]*model.Task, string, error) {
	q := s.db.WithContext(ctx).Where("tenant_id = ?", f.TenantID)
	if f.Assignee != "" {
		q = q.Where("assignee = ?", f.Assignee)
	}
	if f.Status != "" {
		q = q.Where("status = ?", string(f.Status))
	}
	if f.InstanceID != "" {
		q = q.Where("instance_id = ?", f.InstanceID)
	}
	if f.Page.Cursor != "" {
		at, id, err := decodeCursor(f.Page.Cursor)
		if err != nil {
			return nil, "", err
		}
		q = q.Where("(created_at > ? OR (created_at = ? AND id > ?))", at, at, id)
	}
	var rows []taskRow
	if err := q.Order("created_at, id").Limit(f.Page.Limit + 1).Find(&rows).Error; err != nil {
		return nil, "", fmt.Errorf("store: unable to list tasks: %w", err)
	}
	next := ""
	if len(rows) > f.Page.Limit {
		rows = rows[:f.Page.Limit]
		last := rows[len(rows)-1]
		next = encodeCursor(last.CreatedAt, last.ID)
	}
	out := make([]*model.Task, len(rows))
	for i := range rows {
		out[i] = rows[i].toModel()
	}
	return out, next, nil
}

func encodeCursor(at time.Time, id string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(at.UnixNano(), 10) + "|" + id))
}

func decodeCursor(c string) (time.Time, string, error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	bad := model.CodedError(model.EINVALID, "invalid_cursor", "cursor is malformed")
	if err != nil {
		return time.Time{}, "", bad
	}
	ns, id, ok := strings.Cut(string(b), "|")
	n, err := strconv.ParseInt(ns, 10, 64)
	if !ok || err != nil {
		return time.Time{}, "", bad
	}
	return time.Unix(0, n).UTC(), id, nil
}

// OpenBookmarks lists the instance's open bookmarks.
func (s *Store) OpenBookmarks(ctx context.Context, tenant, instanceID string) ([]*model.Bookmark, error) {
	var rows []bookmarkRow
	if err := s.db.WithContext(ctx).Where("instance_id = ? AND tenant_id = ? AND closed_at IS NULL", instanceID, tenant).Order("created_at, id").Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("store: unable to list bookmarks: %w", err)
	}
	out := make([]*model.Bookmark, len(rows))
	for i := range rows {
		out[i] = rows[i].toModel()
	}
	return out, nil
}

// GetBookmark returns ENOTFOUND for an unknown bookmark (open or closed).
func (s *Store) GetBookmark(ctx context.Context, tenant, id string) (*model.Bookmark, error) {
	var r bookmarkRow
	if err := s.db.WithContext(ctx).Where("id = ? AND tenant_id = ?", id, tenant).Take(&r).Error; err != nil {
		return nil, notFound(err, "bookmark %q not found", id)
	}
	return r.toModel(), nil
}

// FindBookmarks lists open bookmarks with the hash.
func (s *Store) FindBookmarks(ctx context.Context, tenant, hash string) ([]*model.Bookmark, error) {
	var rows []bookmarkRow
	if err := s.db.WithContext(ctx).Where("tenant_id = ? AND hash = ? AND closed_at IS NULL", tenant, hash).Order("created_at, id").Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("store: unable to find bookmarks: %w", err)
	}
	out := make([]*model.Bookmark, len(rows))
	for i := range rows {
		out[i] = rows[i].toModel()
	}
	return out, nil
}

// QueueMessage stores a message nobody waits for yet.
func (s *Store) QueueMessage(ctx context.Context, m *model.Message) error {
	r := messageRow{ID: m.ID, TenantID: m.TenantID, Name: m.Name, CorrelationID: m.CorrelationID, Hash: m.Hash, Data: string(m.Data),
		CreatedAt: m.CreatedAt.UTC(), ExpiresAt: m.ExpiresAt.UTC()}
	if err := s.db.WithContext(ctx).Create(&r).Error; err != nil {
		return fmt.Errorf("store: unable to queue message: %w", err)
	}
	return nil
}

// FindMessage returns the oldest queued, unexpired, unconsumed message with the hash, or nil.
func (s *Store) FindMessage(ctx context.Context, tenant, hash string, now time.Time) (*model.Message, error) {
	var rows []messageRow
	if err := s.db.WithContext(ctx).Where("tenant_id = ? AND hash = ? AND consumed_at IS NULL AND expires_at > ?", tenant, hash, now.UTC()).
		Order("created_at, id").Limit(1).Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("store: unable to find queued message: %w", err)
	}
	if len(rows) == 0 {
		return nil, nil
	}
	r := rows[0]
	return &model.Message{ID: r.ID, TenantID: r.TenantID, Name: r.Name, CorrelationID: r.CorrelationID, Hash: r.Hash, Data: json.RawMessage(r.Data),
		CreatedAt: r.CreatedAt.UTC(), ExpiresAt: r.ExpiresAt.UTC()}, nil
}

// IsCC reports whether the user was copied on the instance.
func (s *Store) IsCC(ctx context.Context, tenant, instanceID, username string) (bool, error) {
	var n int64
	err := s.db.WithContext(ctx).Model(&ccRow{}).Where("instance_id = ? AND username = ? AND tenant_id = ?", instanceID, username, tenant).Limit(1).Count(&n).Error
	return n > 0, err
}

// HasTaskIn reports whether the user has or had a task in the instance, or a task of theirs went to their
// delegate (the delegator still sees the instance).
func (s *Store) HasTaskIn(ctx context.Context, tenant, instanceID, username string) (bool, error) {
	var n int64
	err := s.db.WithContext(ctx).Model(&taskRow{}).Where("instance_id = ? AND tenant_id = ? AND (assignee = ? OR delegated_from = ?)", instanceID, tenant, username, username).
		Limit(1).Count(&n).Error
	return n > 0, err
}

// ListCC lists the user's CC records newest first, with the instance's title, template and status.
func (s *Store) ListCC(ctx context.Context, tenant, username string, page model.Page) ([]*model.CCRecord, string, error) {
	type row struct {
		CC     ccRow `gorm:"embedded"`
		Title  string
		Tkey   string
		Status string
	}
	q := s.db.WithContext(ctx).Table("cc").Select("cc.*, instances.title, instances.tkey, instances.status").
		Joins("JOIN instances ON instances.id = cc.instance_id").Where("cc.tenant_id = ? AND cc.username = ?", tenant, username)
	if page.Cursor != "" {
		q = q.Where("cc.id < ?", page.Cursor)
	}
	var rows []row
	if err := q.Order("cc.id DESC").Limit(page.Limit + 1).Scan(&rows).Error; err != nil {
		return nil, "", fmt.Errorf("store: unable to list cc: %w", err)
	}
	next := ""
	if len(rows) > page.Limit {
		rows = rows[:page.Limit]
		next = rows[len(rows)-1].CC.ID
	}
	out := make([]*model.CCRecord, len(rows))
	for i, r := range rows {
		out[i] = &model.CCRecord{ID: r.CC.ID, TenantID: r.CC.TenantID, InstanceID: r.CC.InstanceID, NodeID: r.CC.NodeID, Username: r.CC.Username,
			CreatedAt: r.CC.CreatedAt.UTC(), ReadAt: utcPtr(r.CC.ReadAt), Read: r.CC.ReadAt != nil, Title: r.Title, Template: r.Tkey, Status: model.InstanceStatus(r.Status)}
	}
	return out, next, nil
}

// MarkCCRead marks a CC record of the user read. ENOTFOUND when it is not theirs.
func (s *Store) MarkCCRead(ctx context.Context, tenant, username, id string, at time.Time) error {
	var r ccRow
	if err := s.db.WithContext(ctx).Where("id = ? AND tenant_id = ? AND username = ?", id, tenant, username).Take(&r).Error; err != nil {
		return notFound(err, "cc record %q not found", id)
	}
	if r.ReadAt != nil {
		return nil
	}
	return s.db.WithContext(ctx).Model(&ccRow{}).Where("id = ?", id).Update("read_at", at.UTC()).Error
}
