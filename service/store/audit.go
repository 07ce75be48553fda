package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/halley-bpm/halley/model"
)

type auditRow struct {
	ID          int64 `gorm:"primaryKey;autoIncrement"`
	TenantID    string
	At          time.Time
	Actor       string
	ActorToken  string
	Action      string
	Target      string
	BeforeState *string
	AfterState  *string
	Reason      string
	IP          string `gorm:"column:ip"`
	RequestID   string
}

func (auditRow) TableName() string { return "audit_log" }

func rawPtr(b json.RawMessage) *string {
	if len(b) == 0 {
		return nil
	}
	s := string(b)
	return &s
}

func (r *auditRow) toModel() *model.AuditEntry {
	e := &model.AuditEntry{ID: r.ID, TenantID: r.TenantID, At: r.At.UTC(), Actor: r.Actor, ActorToken: r.ActorToken, Action: r.Action,
		Target: r.Target, Reason: r.Reason, IP: r.IP, RequestID: r.RequestID}
	if r.BeforeState != nil {
		e.Before = json.RawMessage(*r.BeforeState)
	}
	if r.AfterState != nil {
		e.After = json.RawMessage(*r.AfterState)
	}
	return e
}

var _ model.AuditStore = (*Store)(nil)

// clipTo cuts s to at most n bytes on a character boundary: targets are names and ids, but a request may name
// anything.
func clipTo(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !isRuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }

func (s *Store) insertAudit(tx *gorm.DB, e *model.AuditEntry) error {
	if e.At.IsZero() {
		e.At = s.now()
	}
	if e.TenantID == "" {
		e.TenantID = model.DefaultTenant
	}
	row := auditRow{TenantID: e.TenantID, At: e.At.UTC(), Actor: clipTo(e.Actor, 200), ActorToken: e.ActorToken, Action: e.Action,
		Target: clipTo(e.Target, 255), BeforeState: rawPtr(e.Before), AfterState: rawPtr(e.After), Reason: clipTo(e.Reason, 1000), IP: clipTo(e.IP, 64), RequestID: clipTo(e.RequestID, 64)}
	if err := tx.Create(&row).Error; err != nil {
		return fmt.Errorf("store: unable to write the audit entry %s %s: %w", e.Action, e.Target, err)
	}
	e.ID = row.ID
	return nil
}

// auditCols and auditArgs write an entry with the engine's batched step writes (model.Work.Audit).
const auditCols = "tenant_id, at, actor, actor_token, action, target, before_state, after_state, reason, ip, request_id"

func auditArgs(e *model.AuditEntry, now time.Time) []any {
	if e.At.IsZero() {
		e.At = now
	}
	if e.TenantID == "" {
		e.TenantID = model.DefaultTenant
	}
	return []any{e.TenantID, e.At.UTC(), clipTo(e.Actor, 200), e.ActorToken, e.Action, clipTo(e.Target, 255), rawPtr(e.Before), rawPtr(e.After),
		clipTo(e.Reason, 1000), clipTo(e.IP, 64), clipTo(e.RequestID, 64)}
}

// auditIn writes the audit entry ctx carries, if any, in tx — the transaction of the change it records — with
// before and after filled in where the caller left them empty. inTx marks it committed with the transaction.
func (s *Store) auditIn(ctx context.Context, tx *gorm.DB, before, after any) error {
	e := model.AuditFrom(ctx)
	if e == nil {
		return nil
	}
	e.Fill(before, after)
	if err := s.insertAudit(tx, e); err != nil {
		return err
	}
	e.Stage()
	return nil
}

// AppendAudit writes an entry on its own (changes that are not one store transaction: files, the engine's
// group commits fall back to it through the recorder).
func (s *Store) AppendAudit(ctx context.Context, e *model.AuditEntry) error {
	return s.insertAudit(s.db.WithContext(ctx), e)
}

// ListAudit pages through entries newest first by (at, id); the cursor is the last entry's (at, id).
func (s *Store) ListAudit(ctx context.Context, f model.AuditFilter) ([]*model.AuditEntry, string, error) {
	q := s.db.WithContext(ctx).Where("tenant_id = ?", f.TenantID)
	if f.Actor != "" {
		q = q.Where("actor = ?", f.Actor)
	}
	if a, ok := strings.CutSuffix(f.Action, "*"); ok {
		if a != "" {
			q = q.Where("action LIKE ? ESCAPE '!'", likeEscape(a)+"%")
		}
	} else if f.Action != "" {
		q = q.Where("action = ?", f.Action)
	}
	if !f.From.IsZero() {
		q = q.Where("at >= ?", f.From.UTC())
	}
	if !f.To.IsZero() {
		q = q.Where("at < ?", f.To.UTC())
	}
	if f.Page.Cursor != "" {
		at, idStr, err := decodeCursor(f.Page.Cursor)
		id, perr := strconv.ParseInt(idStr, 10, 64)
		if err != nil || perr != nil {
			return nil, "", model.CodedError(model.EINVALID, "invalid_cursor", "cursor is malformed")
		}
		q = q.Where("(at < ? OR (at = ? AND id < ?))", at, at, id)
	}
	var rows []auditRow
	if err := q.Order("at DESC, id DESC").Limit(f.Page.Limit + 1).Find(&rows).Error; err != nil {
		return nil, "", fmt.Errorf("store: unable to list the audit log: %w", err)
	}
	next := ""
	if len(rows) > f.Page.Limit {
		rows = rows[:f.Page.Limit]
		last := rows[len(rows)-1]
		next = encodeCursor(last.At, strconv.FormatInt(last.ID, 10))
	}
	out := make([]*model.AuditEntry, len(rows))
	for i := range rows {
		out[i] = rows[i].toModel()
	}
	return out, next, nil
}

// likeEscape escapes LIKE's wildcards with '!'.
func likeEscape(s string) string {
	return strings.NewReplacer("!", "!!", "%", "!%", "_", "!_").Replace(s)
}
