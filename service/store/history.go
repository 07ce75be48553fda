package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	gojson "github.com/goccy/go-json"

	"github.com/halley-bpm/halley/model"
)

// History is written one row per step of an instance (migration 0020): the step's first event in the row's columns
// and its further events, oldest first, in more_events. A timer fire made five rows (timer.fired, the delay's
// completion, the end's activation and completion, instance.completed) and makes one; an approval step made four or
// five. The rows are expanded when history is read, so every reader sees one item per event.

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
	MoreEvents sql.NullString `gorm:"column:more_events"`
}

func (historyRow) TableName() string { return "history" }

// moreEvent is an event after a row's first. At and Actor are left out when they equal the row's (nil), so that
// an actor "" different from the row's is kept; empty strings and an empty data object are left out.
type moreEvent struct {
	At      *time.Time      `json:"at,omitempty"`
	Actor   *string         `json:"actor,omitempty"`
	Action  string          `json:"action"`
	NodeID  string          `json:"node_id,omitempty"`
	TaskID  string          `json:"task_id,omitempty"`
	Comment string          `json:"comment,omitempty"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// historyTime is an event's time as the database keeps it (DATETIME(6): microseconds, UTC).
func historyTime(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

// historyData is an event's data as a row holds it: "{}" when there is none.
func historyData(d json.RawMessage) string {
	if len(d) == 0 {
		return "{}"
	}
	return string(d)
}

// packHistory returns the step's events as one row's values: the first event and the rest's more_events (nil for
// a step of one event).
func packHistory(evs []model.HistoryEvent) (model.HistoryEvent, any, error) {
	first := evs[0]
	if len(evs) == 1 {
		return first, nil, nil
	}
	at, actor := historyTime(first.At), first.Actor
	more := make([]moreEvent, len(evs)-1)
	for i, h := range evs[1:] {
		m := moreEvent{Action: h.Action, NodeID: h.NodeID, TaskID: h.TaskID, Comment: h.Comment}
		if t := historyTime(h.At); !t.Equal(at) {
			m.At = &t
		}
		if h.Actor != actor {
			a := h.Actor
			m.Actor = &a
		}
		if d := historyData(h.Data); d != "{}" {
			m.Data = json.RawMessage(d)
		}
		more[i] = m
	}
	// encoding/json without HTML escaping keeps the data's bytes as the event gave them (goccy/go-json would write
	// U+2028 as \u2028 even so).
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(more); err != nil {
		return first, nil, fmt.Errorf("store: unable to encode the history of %s: %w", first.InstanceID, err)
	}
	return first, strings.TrimSuffix(b.String(), "\n"), nil
}

// ExpandHistory returns the events of one history row: first (the row's columns) and the events of its
// more_events ("" or NULL: none). Seq, InstanceID, At and Actor of a further event are the row's unless it names
// its own. Exported for the tools that read the history table directly (halley-bench, the fault tests).
func ExpandHistory(first model.HistoryEvent, moreEvents string) ([]model.HistoryEvent, error) {
	if len(first.Data) == 0 {
		first.Data = json.RawMessage("{}")
	}
	if moreEvents == "" {
		return []model.HistoryEvent{first}, nil
	}
	var more []moreEvent
	if err := gojson.Unmarshal([]byte(moreEvents), &more); err != nil {
		return nil, fmt.Errorf("store: history row %d of %s: more_events: %w", first.Seq, first.InstanceID, err)
	}
	out := make([]model.HistoryEvent, 0, 1+len(more))
	out = append(out, first)
	for _, m := range more {
		h := model.HistoryEvent{Seq: first.Seq, InstanceID: first.InstanceID, At: first.At, Actor: first.Actor, Action: m.Action,
			NodeID: m.NodeID, TaskID: m.TaskID, Comment: m.Comment, Data: m.Data}
		if m.At != nil {
			h.At = m.At.UTC()
		}
		if m.Actor != nil {
			h.Actor = *m.Actor
		}
		if len(h.Data) == 0 {
			h.Data = json.RawMessage("{}")
		}
		out = append(out, h)
	}
	return out, nil
}

func (r *historyRow) events() ([]model.HistoryEvent, error) {
	return ExpandHistory(model.HistoryEvent{Seq: r.Seq, InstanceID: r.InstanceID, At: r.At.UTC(), Actor: r.Actor, Action: r.Action,
		NodeID: r.NodeID, TaskID: r.TaskID, Comment: r.Comment, Data: json.RawMessage(r.Data)}, r.MoreEvents.String)
}

// History returns the instance's events, oldest first.
func (s *Store) History(ctx context.Context, tenant, instanceID string) ([]model.HistoryEvent, error) {
	var rows []historyRow
	if err := s.db.WithContext(ctx).Where("instance_id = ? AND tenant_id = ?", instanceID, tenant).Order("seq").Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("store: unable to read history of %s: %w", instanceID, err)
	}
	out := make([]model.HistoryEvent, 0, 4*len(rows))
	for i := range rows {
		evs, err := rows[i].events()
		if err != nil {
			return nil, err
		}
		out = append(out, evs...)
	}
	return out, nil
}

// ScanHistory reads the history rows of db that match where (a condition on the columns a row's events share:
// tenant_id, instance_id, seq; "" for every row) and returns their events, in seq order. For the tools and tests
// that read the table directly, where a condition on action or node_id would miss a step's further events.
func ScanHistory(ctx context.Context, db *sql.DB, where string, args ...any) ([]model.HistoryEvent, error) {
	q := "SELECT seq, instance_id, at, actor, action, node_id, task_id, comment, data, more_events FROM history"
	if where != "" {
		q += " WHERE " + where
	}
	rows, err := db.QueryContext(ctx, q+" ORDER BY seq", args...)
	if err != nil {
		return nil, fmt.Errorf("store: unable to read history: %w", err)
	}
	defer rows.Close()
	var out []model.HistoryEvent
	for rows.Next() {
		var (
			h    model.HistoryEvent
			at   any
			data string
			more sql.NullString
		)
		if err := rows.Scan(&h.Seq, &h.InstanceID, &at, &h.Actor, &h.Action, &h.NodeID, &h.TaskID, &h.Comment, &data, &more); err != nil {
			return nil, fmt.Errorf("store: unable to read history: %w", err)
		}
		h.At, _ = plainValue("history.at", "DATETIME", at).(time.Time)
		h.Data = json.RawMessage(data)
		evs, err := ExpandHistory(h, more.String)
		if err != nil {
			return nil, err
		}
		out = append(out, evs...)
	}
	return out, rows.Err()
}
