package notify

import (
	"context"
	"encoding/json"
	"net/mail"
	"strings"
	"time"

	"github.com/halley-bpm/halley/model"
)

// ChannelRequest is the body of POST /channels.
type ChannelRequest struct {
	Name   string          `json:"name"`
	Kind   string          `json:"kind"`
	Config json.RawMessage `json:"config"`
}

func adminOnly(p *model.Principal) error {
	if !p.IsAdmin() {
		return model.CodedError(model.EFORBIDDEN, "admin_required", "only admins manage notification channels and settings")
	}
	return nil
}

// CreateChannel validates and stores a channel, its config sealed. Codes: admin_required (403); invalid_name,
// invalid_kind, invalid_config (400); insecure_auth, address_not_allowed (422: the host is or resolves to a
// non-public address HALLEY_OUTBOUND_ALLOW does not list); channel_exists (409).
func (s *Service) CreateChannel(ctx context.Context, p *model.Principal, req ChannelRequest) (*model.Channel, error) {
	if err := adminOnly(p); err != nil {
		return nil, err
	}
	req.Name = strings.TrimSpace(req.Name)
	if !channelNameRe.MatchString(req.Name) {
		return nil, model.CodedError(model.EINVALID, "invalid_name", "name must be 1-64 lowercase letters, digits, '-' and '_' (got %q)", req.Name)
	}
	c, err := parseConfig(req.Kind, req.Config)
	if err != nil {
		return nil, err
	}
	if err := s.tr.out.CheckURL(ctx, c.target(req.Kind)); err != nil {
		return nil, err
	}
	sealed, err := s.seal.seal(p.TenantID, req.Name, c)
	if err != nil {
		return nil, err
	}
	ch := &model.Channel{TenantID: p.TenantID, Name: req.Name, Kind: req.Kind, Config: c.public(req.Kind), Secrets: sealed, CreatedBy: p.Username,
		CreatedAt: s.clock.Now().UTC().Truncate(time.Microsecond)}
	if err := s.store.CreateChannel(ctx, ch); err != nil {
		return nil, err
	}
	s.settingsChanged(p.TenantID)
	s.log.InfoContext(ctx, "notification channel created", "channel", ch.Name, "kind", ch.Kind, "target", hostOf(c.target(ch.Kind)), "by", p.Username)
	return public(ch), nil
}

// public is a channel as answers show it: its stored public config only.
func public(ch *model.Channel) *model.Channel {
	out := *ch
	out.Secrets = ""
	return &out
}

// Channels lists the tenant's channels (admins).
func (s *Service) Channels(ctx context.Context, p *model.Principal) ([]*model.Channel, error) {
	if err := adminOnly(p); err != nil {
		return nil, err
	}
	chs, err := s.store.ListChannels(ctx, p.TenantID)
	for i := range chs {
		chs[i] = public(chs[i])
	}
	return chs, err
}

// DeleteChannel deletes a channel; its pending deliveries fail. ENOTFOUND when unknown.
func (s *Service) DeleteChannel(ctx context.Context, p *model.Principal, name string) error {
	if err := adminOnly(p); err != nil {
		return err
	}
	if err := s.store.DeleteChannel(ctx, p.TenantID, name); err != nil {
		return err
	}
	s.settingsChanged(p.TenantID)
	s.log.InfoContext(ctx, "notification channel deleted", "channel", name, "by", p.Username)
	return nil
}

// TestChannel sends a test message through a channel now and says whether the channel accepted it: nil, or
// channel_test_failed (502) with the channel's answer, or the outbound guard's refusal, in words. to is a
// username or an email address (default: the caller).
func (s *Service) TestChannel(ctx context.Context, p *model.Principal, name, to string) error {
	if err := adminOnly(p); err != nil {
		return err
	}
	ch, err := s.store.GetChannel(ctx, p.TenantID, name)
	if err != nil {
		return err
	}
	settings, err := s.store.NotificationSettings(ctx, p.TenantID)
	if err != nil {
		return err
	}
	to = strings.TrimSpace(to)
	if to == "" {
		to = p.Username
	}
	var rcpt Recipient
	if a, err := mail.ParseAddress(to); err == nil && strings.Contains(to, "@") {
		rcpt = Recipient{Username: p.Username, DisplayName: a.Name, Email: a.Address, Language: settings.Language}
	} else {
		users, err := s.store.Users(ctx, p.TenantID, []string{to})
		if err != nil {
			return err
		}
		switch u := users[to]; {
		case u != nil:
			rcpt = Recipient{Username: u.Username, DisplayName: displayName(users, u.Username), Email: u.Email, Mobile: u.Mobile, IMID: u.IMID,
				Language: language(u, settings)}
		case to == p.Username:
			rcpt = Recipient{Username: p.Username, DisplayName: p.Username, Language: settings.Language} // an API token, or a user gone
		default:
			return model.CodedError(model.EUNPROCESSABLE, "unknown_recipient", "to must be a username or an email address; no user %q", to)
		}
	}
	if rcpt.Language == "" {
		rcpt.Language = LangZH
	}
	_, snd, err := s.channelOf(ch)
	if err != nil {
		return model.CodedError(model.EBADGATEWAY, "channel_test_failed", "channel %q cannot be used: %v", name, err)
	}
	phone := ch.Kind != model.ChannelSMTP && ch.Kind != model.ChannelWebhook
	d := Data{Lang: rcpt.Language, Recipient: rcpt.DisplayName, Step: name, Link: s.links.InboxPage(phone)}
	subject, body, err := render(nil, d)
	if err != nil {
		return err
	}
	m := &Message{Event: "test", At: s.clock.Now().UTC(), Lang: rcpt.Language, Subject: subject, Text: body, Link: d.Link, To: rcpt}
	if err := snd.Send(ctx, m); err != nil {
		s.log.WarnContext(ctx, "notification channel test failed", "channel", name, "kind", ch.Kind, "err", errorText(err))
		return model.CodedError(model.EBADGATEWAY, "channel_test_failed", "channel %q did not accept the test message: %s", name, errorText(err)).
			WithDetails(map[string]any{"channel": name, "kind": ch.Kind})
	}
	s.log.InfoContext(ctx, "notification channel test delivered", "channel", name, "kind", ch.Kind, "by", p.Username)
	return nil
}

// Settings returns the tenant's notification settings (admins).
func (s *Service) Settings(ctx context.Context, p *model.Principal) (*model.NotificationSettings, error) {
	if err := adminOnly(p); err != nil {
		return nil, err
	}
	st, err := s.store.NotificationSettings(ctx, p.TenantID)
	if err != nil {
		return nil, err
	}
	if st.Events == nil {
		st.Events = map[string][]string{}
	}
	if st.Templates == nil {
		st.Templates = map[string]map[string]model.MessageTemplate{}
	}
	return st, nil
}

// PutSettings replaces the tenant's notification settings. Codes: invalid_language, invalid_digest_hour,
// invalid_timezone (400); invalid_event, unknown_channel, invalid_template (422).
func (s *Service) PutSettings(ctx context.Context, p *model.Principal, st *model.NotificationSettings) (*model.NotificationSettings, error) {
	if err := adminOnly(p); err != nil {
		return nil, err
	}
	if st.Language != "" && st.Language != LangZH && st.Language != LangEN {
		return nil, model.CodedError(model.EINVALID, "invalid_language", "language must be zh-CN or en (got %q)", st.Language)
	}
	if st.DigestHour != nil && (*st.DigestHour < 0 || *st.DigestHour > 23) {
		return nil, model.CodedError(model.EINVALID, "invalid_digest_hour", "digest_hour must be an hour from 0 to 23, or null for no digest")
	}
	if _, err := time.LoadLocation(st.TimeZone); err != nil || len(st.TimeZone) > 64 {
		return nil, model.CodedError(model.EINVALID, "invalid_timezone", "timezone must be an IANA zone like Asia/Shanghai (got %q)", st.TimeZone)
	}
	chs, err := s.store.ListChannels(ctx, p.TenantID)
	if err != nil {
		return nil, err
	}
	known := map[string]bool{}
	for _, c := range chs {
		known[c.Name] = true
	}
	for ev, names := range st.Events {
		if !model.ValidNotifyEvent(ev) {
			return nil, model.CodedError(model.EUNPROCESSABLE, "invalid_event", "events: %q is not a notified event (%s)", ev, strings.Join(model.NotifyEvents, ", ")).
				WithDetails(map[string]any{"events": model.NotifyEvents})
		}
		seen := map[string]bool{}
		for _, n := range names {
			if !known[n] {
				return nil, model.CodedError(model.EUNPROCESSABLE, "unknown_channel", "events.%s: there is no channel named %q", ev, n)
			}
			if seen[n] {
				return nil, model.CodedError(model.EUNPROCESSABLE, "unknown_channel", "events.%s names channel %q twice", ev, n)
			}
			seen[n] = true
		}
	}
	if err := checkTemplates(st.Templates); err != nil {
		return nil, err
	}
	now := s.clock.Now().UTC().Truncate(time.Microsecond)
	st.UpdatedBy, st.UpdatedAt = p.Username, &now
	if err := s.store.PutNotificationSettings(ctx, p.TenantID, st); err != nil {
		return nil, err
	}
	s.settingsChanged(p.TenantID)
	return s.Settings(ctx, p)
}

// Notifications pages through the caller's notifications, newest first, and counts the unread ones.
func (s *Service) Notifications(ctx context.Context, p *model.Principal, unreadOnly bool, page model.Page) ([]*model.Notification, string, int, error) {
	items, next, err := s.store.ListNotifications(ctx, model.NotificationFilter{TenantID: p.TenantID, Username: p.Username, UnreadOnly: unreadOnly, Page: page})
	if err != nil {
		return nil, "", 0, err
	}
	unread, err := s.store.CountUnread(ctx, p.TenantID, p.Username)
	return items, next, unread, err
}

// MarkRead marks one of the caller's notifications read; ENOTFOUND when it is not theirs.
func (s *Service) MarkRead(ctx context.Context, p *model.Principal, id string) error {
	return s.store.MarkNotificationRead(ctx, p.TenantID, p.Username, id, s.clock.Now())
}

// MarkAllRead marks every notification of the caller read and returns how many were unread.
func (s *Service) MarkAllRead(ctx context.Context, p *model.Principal) (int, error) {
	return s.store.MarkAllNotificationsRead(ctx, p.TenantID, p.Username, s.clock.Now())
}

// Deliveries pages through the tenant's delivery log (admins); status is "", pending, delivered, failed or
// skipped.
func (s *Service) Deliveries(ctx context.Context, p *model.Principal, status string, page model.Page) ([]*model.NotificationDelivery, string, error) {
	if err := adminOnly(p); err != nil {
		return nil, "", err
	}
	switch status {
	case "", model.DeliveryPending, model.DeliveryDelivered, model.DeliveryFailed, model.DeliverySkipped:
	default:
		return nil, "", model.CodedError(model.EINVALID, "invalid_status", "status must be pending, delivered, failed or skipped (got %q)", status)
	}
	return s.store.ListNotificationDeliveries(ctx, p.TenantID, status, page)
}
