package engine

import (
	"context"
	"maps"
	"time"

	"github.com/halley-bpm/halley/service/template"
)

// titles renders the version's title pattern for an instance started by initiator at `at` with the data doc:
// the plain title and the title per language (docs/templates.md "Title patterns"). ok is false when the version
// has no pattern. The plain title is the initiator's language's when they chose one. {initiator} reads the initiator's display name (their user name when they have none or are not
// a user, e.g. a trigger's synthetic initiator); {date} the start's date in the server's time zone.
func (e *Engine) titles(ctx context.Context, tenant, initiator string, c *template.Compiled, at time.Time, doc []byte) (string, map[string]string, bool) {
	if !template.HasTitlePattern(c.Def) {
		return "", nil, false
	}
	who, lang := initiator, ""
	if u, err := e.dir.GetUser(ctx, tenant, initiator); err == nil {
		if u.DisplayName != "" {
			who = u.DisplayName
		}
		lang = u.Language
	}
	plain, by, ok := template.RenderTitles(c.Def, c.Name, template.TitleValues{Initiator: who, Date: at.In(time.Local)}, doc)
	// The plain title (what inboxes, notifications and tasks show) reads in the initiator's language when they
	// chose one: their colleagues most likely share it.
	if s := by[lang]; s != "" {
		plain = s
	}
	return plain, by, ok
}

// retitle renders the title again after the initiator resubmitted changed data, when the title came from the
// pattern (a title the starter gave stays).
func (s *step) retitle() {
	if len(s.inst.TitleI18n) == 0 {
		return
	}
	plain, by, ok := s.e.titles(s.ctx, s.inst.TenantID, s.inst.Initiator, s.c, s.inst.CreatedAt, s.inst.Context)
	if !ok || plain == "" || (plain == s.inst.Title && maps.Equal(by, s.inst.TitleI18n)) {
		return
	}
	s.inst.Title, s.inst.TitleI18n = plain, by
}
