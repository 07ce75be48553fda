// Package audit records who changed what: every admin change (templates, plugins, users, tokens, departments,
// subscriptions) and every jump, terminate and trigger override, with before and after where they apply. An
// entry rides in the context of the change (model.WithAudit); the store transaction that makes the change writes
// it (so both commit or neither), and what no single transaction makes is written right after it succeeded.
// Entries are kept for a retention of their own and purged oldest first.
package audit

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/clock"
)

// Recorder records changes and serves the log.
type Recorder struct {
	store model.AuditStore
	now   func() time.Time
	log   *slog.Logger
}

// Options tune the recorder; the zero value is the default.
type Options struct {
	Clock  clock.Clock  // default clock.Real{}
	Logger *slog.Logger // default slog.Default()
}

// New returns a recorder on store.
func New(store model.AuditStore, opts Options) *Recorder {
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Recorder{store: store, now: opts.Clock.Now, log: opts.Logger}
}

// Meta is what the HTTP layer knows of a request, for the entry.
type Meta struct {
	IP        string
	RequestID string
}

// Record runs change with a context carrying an entry for (actor, action, target) and records it: in the
// store transaction of the change when the change is one, else right after change succeeded. change may set
// the entry's Before, After and Reason; stores fill in what it leaves empty. Nothing is recorded when change
// fails or discards the entry. An entry that could not be written after a successful change is logged as an error (the change is
// done; failing the request would make the client retry it).
func (r *Recorder) Record(ctx context.Context, actor *model.Principal, action, target string, meta Meta,
	change func(ctx context.Context, e *model.AuditEntry) error) error {
	e := &model.AuditEntry{TenantID: actor.TenantID, At: r.now().UTC(), Actor: actor.Username, Action: action, Target: target,
		IP: meta.IP, RequestID: meta.RequestID}
	if actor.Token {
		e.ActorToken = actor.TokenID
	}
	if err := change(model.WithAudit(ctx, e), e); err != nil {
		return err
	}
	if e.Written() || e.Discarded() {
		return nil
	}
	if err := r.store.AppendAudit(context.WithoutCancel(ctx), e); err != nil {
		r.log.Error("audit: unable to record a change that was made", "action", action, "target", target, "actor", actor.Username, "err", err)
	}
	return nil
}

// Filter is GET /audit's query.
type Filter struct {
	Actor, Action string
	From, To      time.Time
}

// List pages through the tenant's entries, newest first. EINVALID for a bad filter or cursor.
func (r *Recorder) List(ctx context.Context, tenant string, f Filter, page model.Page) ([]*model.AuditEntry, string, error) {
	if !f.From.IsZero() && !f.To.IsZero() && !f.From.Before(f.To) {
		return nil, "", model.CodedError(model.EINVALID, "invalid_range", "from must be before to")
	}
	if len(f.Actor) > 200 || len(f.Action) > 64 {
		return nil, "", model.CodedError(model.EINVALID, "invalid_filter", "actor is at most 200 characters and action at most 64")
	}
	return r.store.ListAudit(ctx, model.AuditFilter{TenantID: tenant, Actor: f.Actor, Action: f.Action, From: f.From, To: f.To, Page: page})
}

// Purge deletes the entries older than retention, in batches, and returns how many it deleted. Retention 0 keeps
// everything.
func (r *Recorder) Purge(ctx context.Context, retention time.Duration) (int64, error) {
	if retention <= 0 {
		return 0, nil
	}
	before := r.now().Add(-retention)
	var total int64
	for {
		n, err := r.store.PurgeAudit(ctx, before, purgeBatch)
		total += n
		if err != nil {
			return total, fmt.Errorf("audit: purge: %w", err)
		}
		if n < purgeBatch {
			if total > 0 {
				r.log.Info("audit: purged old entries", "count", total, "before", before.UTC().Format(time.RFC3339))
			}
			return total, nil
		}
		if err := ctx.Err(); err != nil {
			return total, err
		}
	}
}

const purgeBatch = 1000
