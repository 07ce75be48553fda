package model

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"time"
)

// Audit actions: what GET /audit lists, one per kind of change. Add an action here and record it with one call
// (audit.Recorder.Record in the HTTP layer); the store writes it with the change where the change is one
// transaction.
const (
	AuditTemplateCreate     = "template.create"
	AuditTemplateDraft      = "template.draft_save"
	AuditTemplatePublish    = "template.publish"
	AuditPluginUpload       = "plugin.upload"
	AuditUserCreate         = "user.create"
	AuditUserUpdate         = "user.update"
	AuditUserPasswordReset  = "user.password_reset"
	AuditUserPassword       = "user.password_change" // a user changed their own password
	AuditUserDelete         = "user.delete"
	AuditTokenCreate        = "token.create"
	AuditTokenDelete        = "token.delete"
	AuditDepartmentCreate   = "department.create"
	AuditDelegationCreate   = "delegation.create"
	AuditDelegationDelete   = "delegation.delete"
	AuditSubscriptionCreate = "subscription.create"
	AuditSubscriptionDelete = "subscription.delete"
	AuditChannelCreate      = "channel.create"
	AuditChannelDelete      = "channel.delete"
	// AuditNotificationSettings is a change of the tenant's notification settings (PUT /notification-settings).
	AuditNotificationSettings = "notification_settings.update"
	AuditInstanceJump         = "instance.jump"
	AuditInstanceTerminate    = "instance.terminate"
	// AuditInstanceOverride is an admin's start of a template whose trigger is not manual (POST /instances with
	// "override_trigger": true).
	AuditInstanceOverride = "instance.start_override"
)

// AuditEntry is one line of the audit log: who (Actor, and the API token's id when it was one) did what (Action)
// to what (Target), when, and the state of the target before and after where it applies. Before and After never
// hold secrets: password hashes, token values and signing secrets are left out or shown as "***".
type AuditEntry struct {
	ID         int64           `json:"id"`
	TenantID   string          `json:"-"`
	At         time.Time       `json:"at"`
	Actor      string          `json:"actor"`
	ActorToken string          `json:"actor_token,omitempty"`
	Action     string          `json:"action"`
	Target     string          `json:"target"`
	Before     json.RawMessage `json:"before"`
	After      json.RawMessage `json:"after"`
	// Reason is what the actor gave as the reason, where the action takes one (jump, terminate).
	Reason    string `json:"reason,omitempty"`
	IP        string `json:"ip,omitempty"`
	RequestID string `json:"request_id,omitempty"`

	staged    atomic.Bool // written in a transaction not committed yet
	written   atomic.Bool // committed
	discarded atomic.Bool // not to be written (Discard)
}

// SetBefore records the target's state before the change (marshalled now; nil leaves it empty).
func (e *AuditEntry) SetBefore(v any) { e.Before = auditJSON(v) }

// SetAfter records the target's state after the change.
func (e *AuditEntry) SetAfter(v any) { e.After = auditJSON(v) }

// Fill sets Before and After where they are still empty: a store that sees both sides of a change (under its
// lock) fills them unless the caller chose what to show.
func (e *AuditEntry) Fill(before, after any) {
	if e.Before == nil {
		e.SetBefore(before)
	}
	if e.After == nil {
		e.SetAfter(after)
	}
}

func auditJSON(v any) json.RawMessage {
	switch x := v.(type) {
	case nil:
		return nil
	case json.RawMessage:
		return x
	}
	b, err := json.Marshal(v)
	if err != nil || string(b) == "null" {
		return nil
	}
	return b
}

// Stage marks the entry written in the current transaction of its request; Unstage after a rollback.
func (e *AuditEntry) Stage() { e.staged.Store(true) }

// Unstage undoes Stage after the transaction rolled back.
func (e *AuditEntry) Unstage() { e.staged.Store(false) }

// Staged reports whether the entry is part of a transaction that has not ended yet.
func (e *AuditEntry) Staged() bool { return e.staged.Load() }

// Committed marks a staged entry committed with its transaction.
func (e *AuditEntry) Committed() {
	if e.staged.Swap(false) {
		e.written.Store(true)
	}
}

// Written reports whether the entry was committed (then nobody writes it again).
func (e *AuditEntry) Written() bool { return e.written.Load() }

// Discard drops the entry: the request turned out to change nothing the log records (an admin's start with
// override_trigger of a template started by hand bypassed no trigger). Nobody writes it then.
func (e *AuditEntry) Discard() { e.discarded.Store(true) }

// Discarded reports whether Discard was called.
func (e *AuditEntry) Discarded() bool { return e.discarded.Load() }

type auditKey struct{}

// WithAudit returns a context whose change is recorded by e: the store transaction making the change writes e
// with it (see AuditFrom).
func WithAudit(ctx context.Context, e *AuditEntry) context.Context {
	return context.WithValue(ctx, auditKey{}, e)
}

// AuditFrom returns the audit entry a change made with ctx is to write, or nil. It returns nil once the entry is
// written (or discarded), so the first committed transaction of a request carries it and later ones do not.
func AuditFrom(ctx context.Context) *AuditEntry {
	e, _ := ctx.Value(auditKey{}).(*AuditEntry)
	if e == nil || e.Written() || e.Discarded() {
		return nil
	}
	return e
}

// AuditFilter selects audit entries, newest first.
type AuditFilter struct {
	TenantID string
	Actor    string
	// Action is one action, or a prefix ending in '*' ("template.*").
	Action   string
	From, To time.Time // zero = open
	Page     Page
}

// AuditStore keeps the audit log: appended, listed and purged by age; there is no update and no delete of one
// entry.
type AuditStore interface {
	AppendAudit(ctx context.Context, e *AuditEntry) error
	// ListAudit pages through entries newest first. EINVALID invalid_cursor for a cursor it did not make.
	ListAudit(ctx context.Context, f AuditFilter) ([]*AuditEntry, string, error)
	// PurgeAudit deletes up to batch entries older than before (the oldest first) and says how many it did.
	PurgeAudit(ctx context.Context, before time.Time, batch int) (int64, error)
}

// Masked is what audit entries and answers show for a secret that is set.
const Masked = "***"

// MaskSecret returns Masked for a set secret and "" for none.
func MaskSecret(s string) string {
	if s == "" {
		return ""
	}
	return Masked
}

// RevokesTokens reports whether a change of a user makes the login tokens signed before it stop working: a new
// password (changed or reset), being disabled, or losing a role. Gaining a role ends no session: requests read
// the user's roles from the store (within the identity cache time), so a promotion applies to the live token.
func RevokesTokens(before, after *User) bool {
	if before.PasswordHash != after.PasswordHash || (!before.Disabled && after.Disabled) {
		return true
	}
	for _, r := range before.Roles {
		if !after.HasRole(r) {
			return true
		}
	}
	return false
}

// AuditState is what the audit log shows of a user: no password hash and no timestamps. token_version moves
// when the user's sessions were ended (a password change or reset, disabling, new roles).
func (u *User) AuditState() map[string]any {
	if u == nil {
		return nil
	}
	return map[string]any{"username": u.Username, "display_name": u.DisplayName, "roles": u.Roles, "department": u.Department,
		"manager": u.Manager, "disabled": u.Disabled, "password_change_required": u.PasswordChangeRequired, "language": u.Language,
		"email": u.Email, "mobile": u.Mobile, "im_id": u.IMID, "token_version": u.TokenVersion}
}

// AuditState is what the audit log shows of an API token (never its value or hash).
func (t *APIToken) AuditState() map[string]any {
	if t == nil {
		return nil
	}
	return map[string]any{"id": t.ID, "name": t.Name, "roles": t.Roles, "owner": t.Owner, "created_by": t.CreatedBy, "expires_at": t.ExpiresAt}
}

// AuditState is what the audit log shows of a subscription: the secret as "***" when one is set.
func (s *Subscription) AuditState() map[string]any {
	if s == nil {
		return nil
	}
	secret := ""
	if s.HasSecret || s.Secret != "" {
		secret = Masked
	}
	return map[string]any{"id": s.ID, "event": s.Event, "template": s.Template, "plugin": s.Plugin, "webhook_url": s.WebhookURL, "secret": secret}
}

// MaskDefinitionSecrets returns a template definition with its start trigger's secrets (header_token,
// header_password, stored hashed) shown as "***": a hash of a short secret can be guessed offline, so the audit
// log shows only that one is set. A document that is not a definition is returned as it is.
func MaskDefinitionSecrets(def json.RawMessage) json.RawMessage {
	var doc map[string]json.RawMessage
	if json.Unmarshal(def, &doc) != nil {
		return def
	}
	var nodes []map[string]json.RawMessage
	if json.Unmarshal(doc["nodes"], &nodes) != nil {
		return def
	}
	changed := false
	for _, n := range nodes {
		var tr map[string]json.RawMessage
		if json.Unmarshal(n["trigger"], &tr) != nil || tr == nil {
			continue
		}
		for _, f := range []string{"header_token", "header_password"} {
			var v string
			if json.Unmarshal(tr[f], &v) == nil && v != "" {
				tr[f] = json.RawMessage(`"` + Masked + `"`)
				changed = true
			}
		}
		n["trigger"], _ = json.Marshal(tr)
	}
	if !changed {
		return def
	}
	doc["nodes"], _ = json.Marshal(nodes)
	out, err := json.Marshal(doc)
	if err != nil {
		return def
	}
	return out
}
