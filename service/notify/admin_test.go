package notify_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/notify"
	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
)

func codeOf(err error) string {
	if e, ok := err.(*model.Error); ok {
		return e.Kind + "/" + e.Code
	}
	return "<nil>"
}

func TestCreateChannelValidation(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		f := newFixture(t, s, "")
		f.channel("ding", model.ChannelDingTalk, map[string]any{"webhook_url": "https://oapi.dingtalk.com/robot/send?access_token=x"})
		bob := &model.Principal{TenantID: model.DefaultTenant, Username: "bob"}
		for _, tc := range []struct {
			name string
			p    *model.Principal
			req  string
			want string
		}{
			{"not an admin", bob, `{"name":"x","kind":"wecom","config":{"webhook_url":"https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key=k"}}`, "forbidden/admin_required"},
			{"bad name", admin, `{"name":"A B","kind":"wecom","config":{"webhook_url":"https://qyapi.weixin.qq.com/x"}}`, "invalid/invalid_name"},
			{"unknown kind", admin, `{"name":"x","kind":"sms","config":{}}`, "invalid/invalid_kind"},
			{"no config", admin, `{"name":"x","kind":"wecom"}`, "invalid/invalid_config"},
			{"unknown field", admin, `{"name":"x","kind":"wecom","config":{"webhook_url":"https://a.example.com/x","secret":"s"}}`, "invalid/invalid_config"},
			{"ftp URL", admin, `{"name":"x","kind":"feishu","config":{"webhook_url":"ftp://a.example.com/x"}}`, "invalid/invalid_config"},
			{"no URL", admin, `{"name":"x","kind":"webhook","config":{"secret":"s"}}`, "invalid/invalid_config"},
			{"rate too high", admin, `{"name":"x","kind":"webhook","config":{"url":"https://a.example.com/x","rate_per_minute":100000}}`, "invalid/invalid_config"},
			{"smtp without from", admin, `{"name":"x","kind":"smtp","config":{"host":"smtp.example.com"}}`, "invalid/invalid_config"},
			{"smtp bad tls", admin, `{"name":"x","kind":"smtp","config":{"host":"smtp.example.com","from":"a@example.com","tls":"ssl3"}}`, "invalid/invalid_config"},
			{"smtp bad port", admin, `{"name":"x","kind":"smtp","config":{"host":"smtp.example.com","from":"a@example.com","port":70000}}`, "invalid/invalid_config"},
			{"smtp header injection", admin, `{"name":"x","kind":"smtp","config":{"host":"smtp.example.com","from":"a@example.com\r\nBcc: x@example.com"}}`, "invalid/invalid_config"},
			{"smtp user without password", admin, `{"name":"x","kind":"smtp","config":{"host":"smtp.example.com","from":"a@example.com","username":"u"}}`, "invalid/invalid_config"},
			{"password in clear text", admin, `{"name":"x","kind":"smtp","config":{"host":"smtp.example.com","from":"a@example.com","tls":"none","username":"u","password":"p"}}`, "unprocessable/insecure_auth"},
			{"loopback robot", admin, `{"name":"x","kind":"dingtalk","config":{"webhook_url":"http://127.0.0.1:8080/robot/send"}}`, "unprocessable/address_not_allowed"},
			{"private relay", admin, `{"name":"x","kind":"smtp","config":{"host":"10.1.2.3","from":"a@example.com","tls":"none"}}`, "unprocessable/address_not_allowed"},
			{"same name", admin, `{"name":"ding","kind":"wecom","config":{"webhook_url":"https://qyapi.weixin.qq.com/x"}}`, "conflict/channel_exists"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				var req notify.ChannelRequest
				if err := json.Unmarshal([]byte(tc.req), &req); err != nil {
					t.Fatal(err)
				}
				_, err := f.svc.CreateChannel(context.Background(), tc.p, req)
				if got := codeOf(err); got != tc.want {
					t.Fatalf("got %s (%v), want %s", got, err, tc.want)
				}
			})
		}
		chs, err := f.svc.Channels(context.Background(), admin)
		if err != nil || len(chs) != 1 {
			t.Fatalf("channels after refusals: %v %v", chs, err)
		}
		// Defaults: STARTTLS on 587, DingTalk's 20 a minute.
		ch := f.channel("mail", model.ChannelSMTP, map[string]any{"host": "smtp.example.com", "from": "Halley <halley@example.com>", "username": "u", "password": "pw-1"})
		if ch.Config["tls"] != "starttls" || ch.Config["port"] != 587 || ch.Config["password"] != "***" || ch.Config["rate_per_minute"] != 0 {
			t.Errorf("smtp defaults: %v", ch.Config)
		}
		if chs[0].Config["rate_per_minute"] != float64(20) && chs[0].Config["rate_per_minute"] != 20 {
			t.Errorf("dingtalk default rate: %v", chs[0].Config)
		}
	})
}

// TestChannelTestAnswersTheGuardsRefusal: a relay reachable when the channel was made (HALLEY_OUTBOUND_ALLOW
// named it) but not any more: the test endpoint says why, in words.
func TestChannelTestAnswersTheGuardsRefusal(t *testing.T) {
	f := newFixture(t, storetest.Open(t, store.SQLite), "127.0.0.1")
	srv := startMailServer(t, false)
	f.channel("mail", model.ChannelSMTP, map[string]any{"host": "127.0.0.1", "port": srv.port, "username": smtpUser, "password": smtpPassword,
		"from": "halley@example.com"})
	if err := f.svc.TestChannel(context.Background(), admin, "mail", "ops@example.com"); err != nil {
		t.Fatalf("allowed: %v", err)
	}
	strict := f.service("") // the operator dropped 127.0.0.1 from HALLEY_OUTBOUND_ALLOW
	err := strict.TestChannel(context.Background(), admin, "mail", "ops@example.com")
	if codeOf(err) != "bad_gateway/channel_test_failed" ||
		!strings.Contains(err.Error(), "address 127.0.0.1 is a loopback address: Halley calls only public addresses unless HALLEY_OUTBOUND_ALLOW lists it") {
		t.Fatalf("refused: %v", err)
	}
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer hook.Close()
	f.channel("hook", model.ChannelWebhook, map[string]any{"url": hook.URL + "/x?token=hook-token-123"})
	err = strict.TestChannel(context.Background(), admin, "hook", "")
	if codeOf(err) != "bad_gateway/channel_test_failed" || !strings.Contains(err.Error(), "HALLEY_OUTBOUND_ALLOW") || strings.Contains(err.Error(), "hook-token-123") {
		t.Fatalf("webhook refused: %v", err)
	}
	if got := srv.got(); len(got) != 1 {
		t.Fatalf("the relay got %d messages, want the allowed test only", len(got))
	}
	if err := f.svc.TestChannel(context.Background(), admin, "nope", ""); codeOf(err) != "not_found/not_found" {
		t.Fatalf("unknown channel: %v", err)
	}
	if err := f.svc.TestChannel(context.Background(), admin, "mail", "nobody"); codeOf(err) != "unprocessable/unknown_recipient" {
		t.Fatalf("unknown recipient: %v", err)
	}
}

func TestSettingsValidation(t *testing.T) {
	f := newFixture(t, storetest.Open(t, store.SQLite), "")
	f.channel("ding", model.ChannelDingTalk, map[string]any{"webhook_url": "https://oapi.dingtalk.com/robot/send?access_token=x"})
	hour := func(h int) *int { return &h }
	for _, tc := range []struct {
		name string
		st   model.NotificationSettings
		want string
	}{
		{"language", model.NotificationSettings{Language: "fr"}, "invalid/invalid_language"},
		{"hour", model.NotificationSettings{DigestHour: hour(24)}, "invalid/invalid_digest_hour"},
		{"timezone", model.NotificationSettings{TimeZone: "Mars/Olympus"}, "invalid/invalid_timezone"},
		{"event", model.NotificationSettings{Events: map[string][]string{"task.exploded": {"ding"}}}, "unprocessable/invalid_event"},
		{"channel", model.NotificationSettings{Events: map[string][]string{"task.created": {"mail"}}}, "unprocessable/unknown_channel"},
		{"twice", model.NotificationSettings{Events: map[string][]string{"task.created": {"ding", "ding"}}}, "unprocessable/unknown_channel"},
		{"template syntax", model.NotificationSettings{Templates: map[string]map[string]model.MessageTemplate{"task.created": {"en": {Subject: "{{.Title", Body: "x"}}}}, "unprocessable/invalid_template"},
		{"template field", model.NotificationSettings{Templates: map[string]map[string]model.MessageTemplate{"task.created": {"en": {Subject: "{{.Nope}}", Body: "x"}}}}, "unprocessable/invalid_template"},
		{"template language", model.NotificationSettings{Templates: map[string]map[string]model.MessageTemplate{"task.created": {"fr": {Subject: "x", Body: "x"}}}}, "unprocessable/invalid_template"},
		{"template empty", model.NotificationSettings{Templates: map[string]map[string]model.MessageTemplate{"task.created": {"en": {Subject: "x"}}}}, "unprocessable/invalid_template"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := f.svc.PutSettings(context.Background(), admin, &tc.st); codeOf(err) != tc.want {
				t.Fatalf("got %s (%v), want %s", codeOf(err), err, tc.want)
			}
		})
	}
	if _, err := f.svc.PutSettings(context.Background(), &model.Principal{TenantID: model.DefaultTenant, Username: "bob"}, &model.NotificationSettings{}); codeOf(err) != "forbidden/admin_required" {
		t.Fatalf("not an admin: %v", err)
	}
	st, err := f.svc.Settings(context.Background(), admin)
	if err != nil || st.UpdatedAt != nil || len(st.Events) != 0 {
		t.Fatalf("refused settings were saved: %+v %v", st, err)
	}
	f.settings(&model.NotificationSettings{Language: "en", DigestHour: hour(9), TimeZone: "Asia/Shanghai", Events: map[string][]string{"task.created": {"ding"}}})
	st, err = f.svc.Settings(context.Background(), admin)
	if err != nil || st.Language != "en" || *st.DigestHour != 9 || st.TimeZone != "Asia/Shanghai" || st.Events["task.created"][0] != "ding" || st.UpdatedBy != "admin" {
		t.Fatalf("saved settings: %+v %v", st, err)
	}
}

// TestWhoHearsOfWhat: the recipients of each event, in the app, in their language; returned-to-me for the
// resubmit task; nobody for synthetic or disabled users; a re-dispatched batch adds nothing.
func TestWhoHearsOfWhat(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		f := newFixture(t, s, "")
		f.user(&model.User{Username: "alice", DisplayName: "Alice", Language: "en"})
		f.user(&model.User{Username: "bob", DisplayName: "Bob"})
		f.user(&model.User{Username: "carol", DisplayName: "Carol"})
		f.user(&model.User{Username: "eve", DisplayName: "Eve", Disabled: true})
		f.event(
			f.taskCreated("bob", model.TaskKindApproval, 0),
			f.taskCreated("eve", model.TaskKindApproval, 0), // disabled: nothing
			map[string]any{"event": "task.created", "task": map[string]any{"id": "t-w", "assignee": "carol", "status": "waiting"}}, // not yet her turn
			map[string]any{"event": "cc.created", "node_id": "lead", "node_name": "Team lead", "users": []string{"carol", "nobody", "bob"}},
			map[string]any{"event": "node.activated", "node_id": "lead"}, // not a notified event
		)
		f.clk.Advance(time.Second)
		f.event(f.taskCreated("alice", model.TaskKindResubmit, 0))
		f.clk.Advance(time.Second)
		f.event(map[string]any{"event": "instance.completed", "status": "completed"})
		f.event(map[string]any{"event": "instance.rejected", "status": "rejected", "initiator": "system:cron"}) // not a person
		f.clk.Advance(time.Second)
		urged := f.taskCreated("bob", model.TaskKindApproval, 3*time.Hour)
		urged["event"], urged["actor"], urged["comment"] = "task.urged", "alice", "needed today"
		f.event(urged)

		events := func(user string) []string {
			items, _ := f.inbox(user)
			var out []string
			for _, n := range items {
				out = append(out, n.Event+" "+n.Message)
			}
			return out
		}
		if got := strings.Join(events("bob"), " | "); got != "task.urged 催办：Leave i5 | cc.created 抄送：Leave i1 | task.created 待审批：Leave i1" {
			t.Errorf("bob: %s", got)
		}
		if got := strings.Join(events("carol"), " | "); got != "cc.created 抄送：Leave i1" {
			t.Errorf("carol: %s", got)
		}
		if got := strings.Join(events("alice"), " | "); got != "instance.completed Approved: Leave i3 | task.returned Returned to you: Leave i2" {
			t.Errorf("alice: %s", got)
		}
		if got := events("eve"); len(got) != 0 {
			t.Errorf("disabled eve: %v", got)
		}
		items, unread := f.inbox("bob")
		if unread != 3 || items[0].Link != "/tasks/"+urged["task"].(map[string]any)["id"].(string) || items[1].Link != "/instances/i1" || items[0].NodeName != "Team lead" {
			t.Fatalf("bob's list: %d unread, %+v", unread, items[0])
		}
		bob := &model.Principal{TenantID: model.DefaultTenant, Username: "bob"}
		if err := f.svc.MarkRead(context.Background(), bob, items[0].ID); err != nil {
			t.Fatal(err)
		}
		if err := f.svc.MarkRead(context.Background(), &model.Principal{TenantID: model.DefaultTenant, Username: "carol"}, items[1].ID); !model.IsKind(err, model.ENOTFOUND) {
			t.Fatalf("carol marked bob's notification: %v", err)
		}
		unreadOnly, _, n, err := f.svc.Notifications(context.Background(), bob, true, model.Page{Limit: 10})
		if err != nil || n != 2 || len(unreadOnly) != 2 || unreadOnly[0].Read {
			t.Fatalf("after one read: %d unread, %v %v", n, unreadOnly, err)
		}
		if n, err := f.svc.MarkAllRead(context.Background(), bob); err != nil || n != 2 {
			t.Fatalf("read all: %d %v", n, err)
		}

		// The urge's text says who urged and how long it waited.
		var urge *model.Notification
		for _, n := range items {
			if n.Event == model.NotifyTaskUrged {
				urge = n
			}
		}
		if urge == nil || urge.Title != "Leave i5" {
			t.Fatalf("urge: %+v", urge)
		}

		// Dispatching the same rows again (a crash after the handler, before the delete) adds nothing.
		before, _ := f.inbox("bob")
		item := model.OutboxItem{Seq: 1, TenantID: model.DefaultTenant, Kind: model.OutboxEvent, Ref: "task.created", CreatedAt: t0}
		item.Payload, _ = json.Marshal(f.taskCreated("bob", model.TaskKindApproval, 0))
		for range 2 {
			if err := f.svc.HandleEvents(context.Background(), []model.OutboxItem{item}); err != nil {
				t.Fatal(err)
			}
		}
		if after, _ := f.inbox("bob"); len(after) != len(before)+1 {
			t.Fatalf("handling one row twice made %d notifications, want 1", len(after)-len(before))
		}
	})
}

// TestTemplatesAndLanguages: the tenant's language is the default; an admin's template overrides the built-in
// one in its language only; a template that fails at run time falls back to the built-in message.
func TestTemplatesAndLanguages(t *testing.T) {
	f := newFixture(t, storetest.Open(t, store.SQLite), "127.0.0.1")
	var got []notify.Message
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m notify.Message
		_ = json.Unmarshal(readAll(t, r.Body), &m)
		got = append(got, m)
	}))
	defer hook.Close()
	f.user(&model.User{Username: "bob", DisplayName: "Bob"})
	f.user(&model.User{Username: "li", DisplayName: "李雷", Language: "zh-CN"})
	f.user(&model.User{Username: "alice", DisplayName: "Alice"})
	f.channel("hook", model.ChannelWebhook, map[string]any{"url": hook.URL})
	f.settings(&model.NotificationSettings{Language: "en", Events: map[string][]string{model.NotifyTaskCreated: {"hook"}, model.NotifyTaskReminded: {"hook"}},
		Templates: map[string]map[string]model.MessageTemplate{
			model.NotifyTaskCreated:  {"en": {Subject: "[{{.Template}}] {{.Title}} needs {{.Recipient}}", Body: "Step {{.Step}} from {{.Initiator}}: {{.Link}}"}},
			model.NotifyTaskReminded: {"en": {Subject: "{{.Title}}", Body: `{{if eq .Count 3}}{{.Count}}{{else}}{{index .Title 99}}{{end}}`}}, // works on the sample only
		}})
	f.event(f.taskCreated("bob", model.TaskKindApproval, 0), f.taskCreated("li", model.TaskKindApproval, 0))
	remind := f.taskCreated("bob", model.TaskKindApproval, 30*time.Minute)
	remind["event"] = "task.reminder"
	f.event(remind)
	f.deliver()
	if len(got) != 3 {
		t.Fatalf("%d messages", len(got))
	}
	byTo := map[string]notify.Message{}
	for _, m := range got {
		byTo[m.To.Username+" "+m.Event] = m
	}
	if m := byTo["bob task.created"]; m.Lang != "en" || m.Subject != "[leave] Leave i1 needs Bob" || m.Text != "Step Team lead from Alice: https://halley.example.com/tasks/t-1-bob" {
		t.Errorf("bob's overridden message: %+v", m)
	}
	if m := byTo["li task.created"]; m.Lang != "zh-CN" || m.Subject != "待审批：Leave i1" {
		t.Errorf("li's message (no zh-CN override): %+v", m)
	}
	if m := byTo["bob task.reminded"]; m.Subject != "Reminder: Leave i2" || !strings.Contains(m.Text, "waiting for you for 30 min") {
		t.Errorf("a failing override falls back to the built-in message: %+v", m)
	}
	if !strings.Contains(f.logs.String(), "does not work") {
		t.Error("the failing template was not logged")
	}
}

// TestDailyDigest: at the tenant's hour (in its time zone) every user with pending approvals gets one digest a
// day, in the app and through the digest's channels, however often the job runs; outside the hour, none.
func TestDailyDigest(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		f := newFixture(t, s, "127.0.0.1")
		var mu sync.Mutex
		var got []notify.Message
		hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var m notify.Message
			_ = json.Unmarshal(readAll(t, r.Body), &m)
			mu.Lock()
			got = append(got, m)
			mu.Unlock()
		}))
		defer hook.Close()
		f.user(&model.User{Username: "bob", Language: "en"})
		f.user(&model.User{Username: "carol"})
		f.channel("hook", model.ChannelWebhook, map[string]any{"url": hook.URL})
		hour := 17 // 09:00 UTC is 17:00 in Shanghai
		f.settings(&model.NotificationSettings{DigestHour: &hour, TimeZone: "Asia/Shanghai", Events: map[string][]string{model.NotifyDigest: {"hook"}}})
		now := f.clk.Now()
		w := &model.Work{Instance: &model.Instance{ID: "d1", TenantID: model.DefaultTenant, Template: "leave", Version: 1, Title: "Leave", Status: model.StatusRunning,
			Initiator: "alice", Context: json.RawMessage(`{}`), CreatedAt: now, UpdatedAt: now, State: model.InstanceState{Nodes: map[string]*model.NodeVisit{}}}}
		for i, a := range []string{"bob", "bob", "bob", "carol", "dave"} { // dave is not a user (any more)
			tk := &model.Task{ID: "d1-t" + string(rune('a'+i)), TenantID: model.DefaultTenant, InstanceID: "d1", NodeID: "lead", NodeName: "Lead",
				Assignee: a, Status: model.TaskPending, Kind: model.TaskKindApproval, CreatedAt: now}
			w.NewTasks = append(w.NewTasks, tk)
			w.Tasks = append(w.Tasks, tk)
		}
		if err := s.CreateInstance(context.Background(), w); err != nil {
			t.Fatal(err)
		}
		for i := range 3 { // the job runs several times within the hour, on any replica: the first writes them
			if n, err := f.svc.Digest(context.Background()); err != nil || n != map[bool]int{true: 2, false: 0}[i == 0] {
				t.Fatalf("digest run %d: %d %v", i, n, err)
			}
			f.clk.Advance(10 * time.Minute)
		}
		f.deliver()
		mu.Lock()
		if len(got) != 2 {
			t.Fatalf("%d digests sent, want 2", len(got))
		}
		for _, m := range got {
			switch m.To.Username {
			case "bob":
				if m.Subject != "You have 3 pending approvals" || m.Link != "https://halley.example.com/inbox" {
					t.Errorf("bob's digest: %+v", m)
				}
			case "carol":
				if m.Subject != "你有 1 条待审批" {
					t.Errorf("carol's digest: %+v", m)
				}
			}
		}
		mu.Unlock()
		if items, unread := f.inbox("bob"); len(items) != 1 || unread != 1 || items[0].Event != model.NotifyDigest || items[0].Link != "/inbox" {
			t.Fatalf("bob's in-app digest: %v", items)
		}
		f.clk.Advance(2 * time.Hour) // 19:30 in Shanghai: not the hour
		if n, err := f.svc.Digest(context.Background()); err != nil || n != 0 {
			t.Fatalf("digest outside the hour: %d %v", n, err)
		}
		f.clk.Advance(22 * time.Hour) // the next day, at 17:30
		if n, err := f.svc.Digest(context.Background()); err != nil || n != 2 {
			t.Fatalf("next day's digest: %d %v", n, err)
		}
		if items, _ := f.inbox("bob"); len(items) != 2 {
			t.Fatalf("bob has %d digests after two days", len(items))
		}
	})
}

// TestRolledBackStepNotifiesNobody: the event rows of a step are written in its transaction; a step that fails
// rolls them back with everything else, and nobody hears of it. The same step committed is heard of once.
func TestRolledBackStepNotifiesNobody(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		f := newFixture(t, s, "")
		f.user(&model.User{Username: "bob"})
		f.commit() // an instance without events
		step := func(fail bool) error {
			return s.UpdateInstance(context.Background(), model.DefaultTenant, "i1", func(w *model.Work) error {
				ev := f.taskCreated("bob", model.TaskKindApproval, 0)
				ev["at"], ev["instance_id"], ev["template"], ev["title"], ev["initiator"] = f.clk.Now().UTC(), "i1", "leave", "Leave i1", "alice"
				b, _ := json.Marshal(ev)
				w.Outbox = append(w.Outbox, model.OutboxItem{TenantID: model.DefaultTenant, Kind: model.OutboxEvent, Ref: "task.created", Payload: b})
				if fail {
					return errors.New("the step failed after writing its event")
				}
				return nil
			})
		}
		if err := step(true); err == nil {
			t.Fatal("the failing step committed")
		}
		f.dispatch()
		if items, _ := f.inbox("bob"); len(items) != 0 {
			t.Fatalf("a rolled-back step was notified: %v", items)
		}
		if err := step(false); err != nil {
			t.Fatal(err)
		}
		f.dispatch()
		f.dispatch()
		if items, _ := f.inbox("bob"); len(items) != 1 {
			t.Fatalf("the committed step made %d notifications, want 1", len(items))
		}
	})
}
