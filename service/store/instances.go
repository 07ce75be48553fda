package store

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/halley-bpm/halley/model"
)

type instanceRow struct {
	ID            string `gorm:"primaryKey"`
	TenantID      string
	Tkey          string
	Version       int
	Title         string
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

func toInstanceRow(i *model.Instance) (instanceRow, error) {
	st, err := json.Marshal(&i.State)
	if err != nil {
		return instanceRow{}, fmt.Errorf("store: unable to encode state of instance %s: %w", i.ID, err)
	}
	ctx := string(i.Context)
	if ctx == "" {
		ctx = "{}"
	}
	return instanceRow{ID: i.ID, TenantID: i.TenantID, Tkey: i.Template, Version: i.Version, Title: i.Title, Status: i.Status,
		Initiator: i.Initiator, CorrelationID: i.CorrelationID, Context: ctx, State: string(st), Rev: i.Rev,
		CreatedAt: i.CreatedAt.UTC(), UpdatedAt: i.UpdatedAt.UTC(), EndedAt: utcPtr(i.EndedAt)}, nil
}

func (r *instanceRow) toModel(withState bool) (*model.Instance, error) {
	i := &model.Instance{ID: r.ID, TenantID: r.TenantID, Template: r.Tkey, Version: r.Version, Title: r.Title, Status: r.Status,
		Initiator: r.Initiator, CorrelationID: r.CorrelationID, Context: json.RawMessage(r.Context), Rev: r.Rev,
		CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(), EndedAt: utcPtr(r.EndedAt)}
	if withState && r.State != "" {
		if err := json.Unmarshal([]byte(r.State), &i.State); err != nil {
			return nil, fmt.Errorf("store: corrupt state of instance %s: %w", r.ID, err)
		}
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
}

func (taskRow) TableName() string { return "tasks" }

func toTaskRow(t *model.Task) taskRow {
	after := ""
	if len(t.AfterSigners) > 0 {
		after = strings.Join(t.AfterSigners, ",")
	}
	return taskRow{ID: t.ID, TenantID: t.TenantID, InstanceID: t.InstanceID, NodeID: t.NodeID, NodeName: t.NodeName, NodeInstanceID: t.NodeInstanceID,
		Assignee: t.Assignee, Status: t.Status, Kind: t.Kind, Grp: t.Group, Position: t.Position, ParentID: t.ParentID, AfterSigners: after,
		Comment: t.Comment, Data: string(t.Data), DecidedBy: t.DecidedBy, Title: t.Title, Tkey: t.Template, Initiator: t.Initiator,
		CreatedAt: t.CreatedAt.UTC(), DecidedAt: utcPtr(t.DecidedAt)}
}

func (r *taskRow) toModel() *model.Task {
	t := &model.Task{ID: r.ID, TenantID: r.TenantID, InstanceID: r.InstanceID, NodeID: r.NodeID, NodeName: r.NodeName, NodeInstanceID: r.NodeInstanceID,
		Assignee: r.Assignee, Status: r.Status, Kind: r.Kind, Group: r.Grp, Position: r.Position, ParentID: r.ParentID, Comment: r.Comment,
		DecidedBy: r.DecidedBy, Title: r.Title, Template: r.Tkey, Initiator: r.Initiator, CreatedAt: r.CreatedAt.UTC(), DecidedAt: utcPtr(r.DecidedAt)}
	if r.AfterSigners != "" {
		t.AfterSigners = strings.Split(r.AfterSigners, ",")
	}
	if r.Data != "" {
		t.Data = json.RawMessage(r.Data)
	}
	return t
}

type historyRow struct {
	Seq        int64 `gorm:"primaryKey;autoIncrement"`
	TenantID   string
	InstanceID string
	At         time.Time
	Actor      string
	Action     string
	NodeID     string
	TaskID     string
	Comment    string
	Data       string
}

func (historyRow) TableName() string { return "history" }

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

// CreateInstance writes a new instance and the work of its first step in one transaction.
func (s *Store) CreateInstance(ctx context.Context, w *model.Work) error {
	return s.inTx(ctx, func(tx *gorm.DB) error {
		row, err := toInstanceRow(w.Instance)
		if err != nil {
			return err
		}
		if err := tx.Create(&row).Error; err != nil {
			return fmt.Errorf("store: unable to create instance: %w", err)
		}
		return s.writeWork(tx, w)
	})
}

// UpdateInstance locks, loads, calls fn and writes back, in one transaction.
func (s *Store) UpdateInstance(ctx context.Context, tenant, id string, fn func(w *model.Work) error) error {
	return s.inTx(ctx, func(tx *gorm.DB) error {
		ws, err := s.lockWorks(tx, tenant, []string{id})
		if err != nil {
			return err
		}
		if len(ws) == 0 {
			return model.Errorf(model.ENOTFOUND, "instance %q not found", id)
		}
		w := ws[0]
		if err := fn(w); err != nil {
			return err
		}
		return s.saveWorks(tx, w)
	})
}

// lockWorks locks the instance rows with these ids (of one tenant) in id order, and loads each with its open
// tasks into a Work. Missing ids are left out.
func (s *Store) lockWorks(tx *gorm.DB, tenant string, ids []string) ([]*model.Work, error) {
	var rows []instanceRow
	if err := tx.Clauses(s.lockClause()...).Where("id IN ? AND tenant_id = ?", ids, tenant).Order("id").Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("store: unable to lock instances: %w", err)
	}
	if len(rows) == 0 {
		return nil, nil
	}
	ws := make([]*model.Work, len(rows))
	byID := make(map[string]*model.Work, len(rows))
	found := make([]string, len(rows))
	for i := range rows {
		inst, err := rows[i].toModel(true)
		if err != nil {
			return nil, err
		}
		ws[i] = &model.Work{Instance: inst, ChangedTasks: map[string]*model.Task{}}
		byID[inst.ID] = ws[i]
		found[i] = inst.ID
	}
	var trows []taskRow
	if err := tx.Where("instance_id IN ? AND status IN ?", found, []string{model.TaskPending, model.TaskWaiting}).Order("id").Find(&trows).Error; err != nil {
		return nil, fmt.Errorf("store: unable to load open tasks: %w", err)
	}
	for i := range trows {
		w := byID[trows[i].InstanceID]
		w.Tasks = append(w.Tasks, trows[i].toModel())
	}
	for _, w := range ws {
		if w.Tasks == nil {
			w.Tasks = []*model.Task{}
		}
	}
	return ws, nil
}

// saveWorks writes back the instance rows of works loaded by lockWorks and everything else they changed.
func (s *Store) saveWorks(tx *gorm.DB, ws ...*model.Work) error {
	for _, w := range ws {
		nrow, err := toInstanceRow(w.Instance)
		if err != nil {
			return err
		}
		res := tx.Model(&instanceRow{}).Where("id = ?", nrow.ID).Updates(map[string]any{
			"title": nrow.Title, "status": nrow.Status, "context": nrow.Context, "state": nrow.State, "rev": nrow.Rev,
			"updated_at": nrow.UpdatedAt, "ended_at": nrow.EndedAt, "correlation_id": nrow.CorrelationID,
		})
		if res.Error != nil {
			return fmt.Errorf("store: unable to update instance %s: %w", nrow.ID, res.Error)
		}
		if err := s.writeWork(tx, w); err != nil {
			return err
		}
	}
	return nil
}

// writeWork writes what the engine changed besides the instance row, each kind in one batched statement.
func (s *Store) writeWork(tx *gorm.DB, w *model.Work) error {
	if len(w.NewTasks) > 0 {
		rows := make([]taskRow, len(w.NewTasks))
		isNew := make(map[string]bool, len(w.NewTasks))
		for i, t := range w.NewTasks {
			rows[i] = toTaskRow(t)
			isNew[t.ID] = true
		}
		if err := tx.Create(&rows).Error; err != nil {
			return fmt.Errorf("store: unable to create tasks: %w", err)
		}
		for id := range w.ChangedTasks {
			if isNew[id] {
				delete(w.ChangedTasks, id) // written above in its final form
			}
		}
	}
	if len(w.ChangedTasks) > 0 {
		// Group identical updates (e.g. every other signer cancelled) into one statement.
		type upd struct {
			status, comment, data, decidedBy, after, assignee string
			decidedAt                                         *time.Time
		}
		groups := map[upd][]string{}
		var order []upd
		ids := make([]string, 0, len(w.ChangedTasks))
		for id := range w.ChangedTasks {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		for _, id := range ids {
			r := toTaskRow(w.ChangedTasks[id])
			k := upd{r.Status, r.Comment, r.Data, r.DecidedBy, r.AfterSigners, r.Assignee, r.DecidedAt}
			if r.DecidedAt != nil {
				k.decidedAt = r.DecidedAt
			}
			found := false
			for _, o := range order {
				if o.status == k.status && o.comment == k.comment && o.data == k.data && o.decidedBy == k.decidedBy && o.after == k.after &&
					o.assignee == k.assignee && timeEq(o.decidedAt, k.decidedAt) {
					groups[o] = append(groups[o], id)
					found = true
					break
				}
			}
			if !found {
				order = append(order, k)
				groups[k] = []string{id}
			}
		}
		for _, k := range order {
			err := tx.Model(&taskRow{}).Where("id IN ?", groups[k]).Updates(map[string]any{
				"status": k.status, "comment": k.comment, "data": k.data, "decided_by": k.decidedBy, "after_signers": k.after,
				"assignee": k.assignee, "decided_at": k.decidedAt}).Error
			if err != nil {
				return fmt.Errorf("store: unable to update tasks: %w", err)
			}
		}
	}
	if len(w.History) > 0 {
		rows := make([]historyRow, len(w.History))
		for i, h := range w.History {
			d := string(h.Data)
			if d == "" {
				d = "{}"
			}
			rows[i] = historyRow{TenantID: w.Instance.TenantID, InstanceID: w.Instance.ID, At: h.At.UTC(), Actor: h.Actor, Action: h.Action, NodeID: h.NodeID, TaskID: h.TaskID, Comment: h.Comment, Data: d}
		}
		if err := tx.Create(&rows).Error; err != nil {
			return fmt.Errorf("store: unable to append history: %w", err)
		}
	}
	now := s.now()
	if len(w.NewBookmarks) > 0 {
		rows := make([]bookmarkRow, len(w.NewBookmarks))
		for i, b := range w.NewBookmarks {
			p := string(b.Payload)
			if p == "" {
				p = "{}"
			}
			rows[i] = bookmarkRow{ID: b.ID, TenantID: b.TenantID, InstanceID: b.InstanceID, NodeID: b.NodeID, NodeInstanceID: b.NodeInstanceID, Kind: b.Kind,
				Hash: b.Hash, MessageName: b.MessageName, CorrelationID: b.CorrelationID, Payload: p, CreatedAt: b.CreatedAt.UTC()}
		}
		if err := tx.Create(&rows).Error; err != nil {
			return fmt.Errorf("store: unable to create bookmarks: %w", err)
		}
	}
	// Closed after the inserts: a bookmark may be opened and closed in one step.
	if len(w.CloseBookmarks) > 0 {
		if err := tx.Model(&bookmarkRow{}).Where("node_instance_id IN ? AND closed_at IS NULL", w.CloseBookmarks).Update("closed_at", now).Error; err != nil {
			return fmt.Errorf("store: unable to close bookmarks: %w", err)
		}
	}
	if len(w.NewTimers) > 0 {
		rows := make([]timerRow, len(w.NewTimers))
		for i, t := range w.NewTimers {
			p := string(t.Payload)
			if p == "" {
				p = "{}"
			}
			rows[i] = timerRow{ID: t.ID, TenantID: t.TenantID, InstanceID: t.InstanceID, NodeID: t.NodeID, NodeInstanceID: t.NodeInstanceID, Kind: t.Kind,
				DueAt: t.DueAt.UTC(), Status: model.TimerPending, Payload: p, CreatedAt: now}
		}
		// A re-armed timer (same id) replaces its row. An upsert, not delete-then-insert: deleting ids that do not
		// exist takes InnoDB gap locks, and concurrent steps (time-ordered ids land in one gap) deadlock on them.
		if err := tx.Clauses(clause.OnConflict{UpdateAll: true}).Create(&rows).Error; err != nil {
			return fmt.Errorf("store: unable to create timers: %w", err)
		}
	}
	// Cancelled after the inserts: a timer may be armed and cancelled in one step.
	if len(w.CancelTimers) > 0 {
		if err := tx.Model(&timerRow{}).Where("node_instance_id IN ? AND status = ?", w.CancelTimers, model.TimerPending).Update("status", model.TimerCancelled).Error; err != nil {
			return fmt.Errorf("store: unable to cancel timers: %w", err)
		}
	}
	if len(w.FiredTimers) > 0 {
		if err := tx.Model(&timerRow{}).Where("id IN ? AND status = ?", w.FiredTimers, model.TimerPending).Updates(map[string]any{"status": model.TimerFired, "fired_at": now}).Error; err != nil {
			return fmt.Errorf("store: unable to mark timers fired: %w", err)
		}
	}
	if len(w.ConsumeMessage) > 0 {
		res := tx.Model(&messageRow{}).Where("id IN ? AND consumed_at IS NULL", w.ConsumeMessage).Update("consumed_at", now)
		if res.Error != nil {
			return fmt.Errorf("store: unable to consume messages: %w", res.Error)
		}
		if res.RowsAffected != int64(len(w.ConsumeMessage)) {
			// Another step consumed it first: this one runs again and no longer finds it.
			return model.ErrStaleRead
		}
	}
	if len(w.CC) > 0 {
		rows := make([]ccRow, len(w.CC))
		for i, c := range w.CC {
			rows[i] = ccRow{ID: c.ID, TenantID: c.TenantID, InstanceID: c.InstanceID, NodeID: c.NodeID, Username: c.Username, CreatedAt: c.CreatedAt.UTC()}
		}
		if err := tx.Create(&rows).Error; err != nil {
			return fmt.Errorf("store: unable to create cc records: %w", err)
		}
	}
	if len(w.NewPluginRuns) > 0 {
		rows := make([]pluginRunRow, len(w.NewPluginRuns))
		for i, r := range w.NewPluginRuns {
			rows[i] = pluginRunRow{ID: r.ID, TenantID: r.TenantID, Plugin: r.Plugin, Version: r.Version, InstanceID: r.InstanceID, NodeID: r.NodeID,
				NodeInstanceID: r.NodeInstanceID, Phase: r.Phase, Status: r.Status, Attempt: r.Attempt, Input: string(r.Input), CreatedAt: r.CreatedAt.UTC()}
		}
		if err := tx.Create(&rows).Error; err != nil {
			return fmt.Errorf("store: unable to create plugin runs: %w", err)
		}
	}
	for _, u := range w.RunUpdates {
		if err := applyRunUpdate(tx, u); err != nil {
			return err
		}
	}
	if len(w.Outbox) > 0 {
		rows := make([]outboxRow, len(w.Outbox))
		for i, o := range w.Outbox {
			p := string(o.Payload)
			if p == "" {
				p = "{}"
			}
			rows[i] = outboxRow{TenantID: o.TenantID, Kind: o.Kind, Ref: o.Ref, Payload: p, CreatedAt: now}
		}
		if err := tx.Create(&rows).Error; err != nil {
			return fmt.Errorf("store: unable to write outbox: %w", err)
		}
	}
	return nil
}

func timeEq(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.Equal(*b)
}

// GetInstance reads an instance and all its tasks (oldest first).
func (s *Store) GetInstance(ctx context.Context, tenant, id string) (*model.Instance, []*model.Task, error) {
	var row instanceRow
	db := s.db.WithContext(ctx)
	if err := db.Where("id = ? AND tenant_id = ?", id, tenant).Take(&row).Error; err != nil {
		return nil, nil, notFound(err, "instance %q not found", id)
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
	q := s.db.WithContext(ctx).Omit("state").Where("tenant_id = ?", f.TenantID)
	if f.Status != "" {
		q = q.Where("status = ?", f.Status)
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
	var rows []instanceRow
	if err := q.Order("id DESC").Limit(f.Page.Limit + 1).Find(&rows).Error; err != nil {
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

// GetTask returns ENOTFOUND for an unknown task.
func (s *Store) GetTask(ctx context.Context, tenant, id string) (*model.Task, error) {
	var r taskRow
	if err := s.db.WithContext(ctx).Where("id = ? AND tenant_id = ?", id, tenant).Take(&r).Error; err != nil {
		return nil, notFound(err, "task %q not found", id)
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
		q = q.Where("status = ?", f.Status)
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

// History returns the instance's events, oldest first.
func (s *Store) History(ctx context.Context, tenant, instanceID string) ([]model.HistoryEvent, error) {
	var rows []historyRow
	if err := s.db.WithContext(ctx).Where("instance_id = ? AND tenant_id = ?", instanceID, tenant).Order("seq").Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("store: unable to read history of %s: %w", instanceID, err)
	}
	out := make([]model.HistoryEvent, len(rows))
	for i, r := range rows {
		out[i] = model.HistoryEvent{Seq: r.Seq, InstanceID: r.InstanceID, At: r.At.UTC(), Actor: r.Actor, Action: r.Action, NodeID: r.NodeID,
			TaskID: r.TaskID, Comment: r.Comment, Data: json.RawMessage(r.Data)}
	}
	return out, nil
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

// PurgeMessages deletes queued messages that expired (or were consumed) before t.
func (s *Store) PurgeMessages(ctx context.Context, before time.Time) (int64, error) {
	res := s.db.WithContext(ctx).Where("expires_at < ? OR consumed_at < ?", before.UTC(), before.UTC()).Delete(&messageRow{})
	if res.Error != nil {
		return 0, fmt.Errorf("store: unable to purge messages: %w", res.Error)
	}
	return res.RowsAffected, nil
}

// IsCC reports whether the user was copied on the instance.
func (s *Store) IsCC(ctx context.Context, tenant, instanceID, username string) (bool, error) {
	var n int64
	err := s.db.WithContext(ctx).Model(&ccRow{}).Where("instance_id = ? AND username = ? AND tenant_id = ?", instanceID, username, tenant).Limit(1).Count(&n).Error
	return n > 0, err
}

// HasTaskIn reports whether the user has or had a task in the instance.
func (s *Store) HasTaskIn(ctx context.Context, tenant, instanceID, username string) (bool, error) {
	var n int64
	err := s.db.WithContext(ctx).Model(&taskRow{}).Where("instance_id = ? AND assignee = ? AND tenant_id = ?", instanceID, username, tenant).Limit(1).Count(&n).Error
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
			CreatedAt: r.CC.CreatedAt.UTC(), ReadAt: utcPtr(r.CC.ReadAt), Read: r.CC.ReadAt != nil, Title: r.Title, Template: r.Tkey, Status: r.Status}
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
