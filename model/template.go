package model

import (
	"context"
	"encoding/json"
	"regexp"
	"time"
)

// Template is a process template: a unique key, a mutable draft and immutable published versions.
type Template struct {
	TenantID    string `json:"-"`
	Key         string `json:"key"`
	Name        string `json:"name"`
	Description string `json:"description"`
	// I18n is the name and description per language, from the definition's i18n (the draft's at creation, the
	// published version's after a publish).
	I18n           TemplateLabels  `json:"i18n,omitempty"`
	Draft          json.RawMessage `json:"-"`
	DraftUpdatedAt time.Time       `json:"-"`
	LatestVersion  *int            `json:"latest_version"`
	// Hidden templates hold the one-off versions of dynamic linear processes; they are not listed.
	Hidden    bool      `json:"-"`
	CreatedBy string    `json:"created_by"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	// StartKind is the start trigger kind of the latest version ("" before the first publish), for listings.
	StartKind string `json:"start_kind,omitempty"`
}

// TemplateVersion is one published, immutable version.
type TemplateVersion struct {
	TenantID    string          `json:"-"`
	Key         string          `json:"key"`
	Version     int             `json:"version"`
	Definition  json.RawMessage `json:"definition"`
	PublishedAt time.Time       `json:"published_at"`
	PublishedBy string          `json:"published_by"`
}

var templateKeyRe = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,63}$`)

// ValidTemplateKey returns EINVALID unless key is 1-64 lowercase letters, digits, '.', '_', '-'.
func ValidTemplateKey(key string) error {
	if !templateKeyRe.MatchString(key) {
		return CodedError(EINVALID, "invalid_key", "key %q must be 1-64 characters: lowercase letters, digits, '.', '_', '-', starting with a letter or digit", key)
	}
	return nil
}

// APITriggerRoute identifies a sync/async API start: module and function are unique across templates.
type APITriggerRoute struct {
	TenantID string
	Module   string
	Function string
	Key      string // the template that owns it
}

// TemplateStore keeps templates and their versions.
type TemplateStore interface {
	// CreateTemplate returns ECONFLICT when the key exists.
	CreateTemplate(ctx context.Context, t *Template) error
	// GetTemplate returns ENOTFOUND when there is no such template.
	GetTemplate(ctx context.Context, tenant, key string) (*Template, error)
	// LatestVersion returns the template's latest published version (0 when none), reading nothing else: it is
	// on the path of every start. ENOTFOUND when there is no such template.
	LatestVersion(ctx context.Context, tenant, key string) (int, error)
	SaveDraft(ctx context.Context, tenant, key string, draft json.RawMessage, at time.Time) error
	// PublishVersion stores version latest+1 of the template's draft as given and returns it. It locks the
	// template row so that concurrent publishes get consecutive numbers. check runs inside the transaction with
	// the number about to be used and may refuse.
	PublishVersion(ctx context.Context, tenant, key string, def json.RawMessage, by string, at time.Time, check func(version int) error) (*TemplateVersion, error)
	// GetVersion returns ENOTFOUND for an unknown version.
	GetVersion(ctx context.Context, tenant, key string, version int) (*TemplateVersion, error)
	ListVersions(ctx context.Context, tenant, key string) ([]*TemplateVersion, error)
	ListTemplates(ctx context.Context, tenant string, page Page) ([]*Template, string, error)
	// CreateHiddenVersion stores a one-off template and its version 1 (dynamic linear processes).
	CreateHiddenVersion(ctx context.Context, t *Template, v *TemplateVersion) error
}

// TriggerLogEntry records what a start trigger did besides starting an instance (e.g. a skipped crontab fire).
type TriggerLogEntry struct {
	TenantID   string    `json:"-"`
	Key        string    `json:"template"`
	Version    int       `json:"version"`
	Kind       string    `json:"kind"`
	Action     string    `json:"action"` // started, skipped, closed
	At         time.Time `json:"at"`
	InstanceID string    `json:"instance_id"`
	Detail     string    `json:"detail"`
}

// TriggerStore keeps API trigger routes, crontab bookkeeping and the trigger log.
type TriggerStore interface {
	// APIRouteOwner returns the template owning module/function, or "" when none does.
	APIRouteOwner(ctx context.Context, tenant, module, function string) (key string, version int, err error)
	// SetAPIRoutes replaces the routes of a template (none when its latest version has no API trigger).
	// ECONFLICT when another template owns one of them.
	SetAPIRoutes(ctx context.Context, tenant, key string, version int, routes []APITriggerRoute) error
	// CancelCronTimers cancels the pending crontab timers of a template and returns their ids.
	CancelCronTimers(ctx context.Context, tenant, key string) ([]string, error)
	// RunningInstance returns the id of a running instance of the template started by initiator, or "".
	RunningInstance(ctx context.Context, tenant, key, initiator string) (string, error)
	AppendTriggerLog(ctx context.Context, e *TriggerLogEntry) error
	TriggerLog(ctx context.Context, tenant, key string, limit int) ([]*TriggerLogEntry, error)
}
