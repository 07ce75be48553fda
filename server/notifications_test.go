package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/server"
	"github.com/halley-bpm/halley/service/notify"
	"github.com/halley-bpm/halley/service/outbox"
	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
)

// lockedBuffer collects log lines from several goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// notifyEnv is the test server with notifications wired as the composition root wires them: the engine writes
// the events notify wants, a dispatcher hands them to it (the test dispatches by hand), and every log line of
// notify and the server goes to logs.
type notifyEnv struct {
	*env
	svc  *notify.Service
	disp *outbox.Dispatcher
	logs *lockedBuffer
}

func newNotifyEnv(t *testing.T, s *store.Store) *notifyEnv {
	t.Helper()
	clk := &testClock{t: time.Now().UTC()}
	logs := &lockedBuffer{}
	lg := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	svc, err := notify.New(notify.Deps{Store: s, Links: notify.WebLinks("http://halley.test"), Outbound: loopbackOutbound(t), SecretKey: []byte("k")},
		notify.Options{Clock: clk, Logger: lg, Jitter: func() float64 { return 0 }})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnvWith(t, s, wiring{clock: clk, notify: svc}, func(d *server.Deps) { d.Logger = lg })
	none := func(context.Context, []model.OutboxItem) error { return nil } // fireDue reads the timer rows themselves
	disp := newDispatcher(t, s, outbox.Handlers{model.OutboxEvent: svc.HandleEvents, model.OutboxTimerArm: none, model.OutboxTimerCancel: none,
		model.OutboxPluginRun: none}, outbox.Options{Logger: lg})
	return &notifyEnv{env: e, svc: svc, disp: disp, logs: logs}
}

// settle dispatches the outbox and sends what is due.
func (e *notifyEnv) settle() {
	e.t.Helper()
	dispatch(e.t, e.disp)
	if _, err := e.svc.DeliverOnce(context.Background()); err != nil {
		e.t.Fatal(err)
	}
}

// inbox is GET /notifications of a user: the events newest first and the unread count.
func (e *notifyEnv) inbox(token string) ([]M, int) {
	e.t.Helper()
	r := e.do("GET", "/api/v1/notifications", token, nil, nil)
	if r.Status != 200 {
		e.t.Fatalf("notifications: %s", r.Body)
	}
	var items []M
	for _, x := range r.JSON["items"].([]any) {
		items = append(items, x.(M))
	}
	return items, int(r.JSON["unread"].(float64))
}

func TestNotificationsFollowAnApproval(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		e := newNotifyEnv(t, s)
		alice, bob, carol := e.mkUser("alice"), e.mkUser("bob"), e.mkUser("carol")
		if r := e.do("PUT", "/api/v1/me", bob, M{"language": "en", "email": "bob@example.com", "im_id": "ou_bob"}, nil); r.Status != 200 || r.JSON["im_id"] != "ou_bob" {
			t.Fatalf("PUT /me: %s", r.Body)
		}
		if r := e.do("PATCH", "/api/v1/users/carol", e.admin, M{"display_name": "Carol Li"}, nil); r.Status != 200 {
			t.Fatalf("PATCH /users: %s", r.Body)
		}
		hook := newHookReceiver(t, 200)
		if r := e.do("POST", "/api/v1/channels", e.admin, M{"name": "hook", "kind": "webhook", "config": M{"url": hook.URL + "/in", "secret": "hook-secret-7"}}, nil); r.Status != 201 {
			t.Fatalf("channel: %s", r.Body)
		}
		if r := e.do("PUT", "/api/v1/notification-settings", e.admin, M{"language": "zh-CN", "events": M{"task.created": []string{"hook"}}}, nil); r.Status != 200 {
			t.Fatalf("settings: %s", r.Body)
		}
		e.publish("leave", []any{start(M{"kind": "manual"}),
			M{"id": "lead", "type": "approval", "name": "Team lead", "approvers": M{"users": []string{"bob"}}, "cc": M{"users": []string{"carol"}}},
			M{"id": "end", "type": "end"}}, []any{edge("start", "lead"), edge("lead", "end")})
		r := e.do("POST", "/api/v1/instances", alice, M{"template": "leave", "title": "Annual leave"}, nil)
		if r.Status != 201 {
			t.Fatalf("start: %s", r.Body)
		}
		inst := r.JSON["id"].(string)
		e.settle()

		items, unread := e.inbox(bob)
		if unread != 1 || len(items) != 1 || items[0]["event"] != "task.created" || items[0]["title"] != "Annual leave" || items[0]["read"] != false ||
			items[0]["message"] != "Approval needed: Annual leave" || items[0]["instance_id"] != inst || !strings.HasPrefix(items[0]["link"].(string), "/tasks/") {
			t.Fatalf("bob's notifications: %d %v", unread, items)
		}
		task := items[0]["task_id"].(string)
		if cc, _ := e.inbox(carol); len(cc) != 1 || cc[0]["event"] != "cc.created" || cc[0]["message"] != "抄送：Annual leave" {
			t.Fatalf("carol's notifications: %v", cc)
		}
		bodies, _ := hook.got()
		if len(bodies) != 1 || !strings.Contains(string(bodies[0]), `"link":"http://halley.test/tasks/`+task+`"`) || !strings.Contains(string(bodies[0]), `"lang":"en"`) {
			t.Fatalf("webhook: %q", bodies)
		}

		// Reading: 204, then unread 0; another user's id is 404 and changes nothing.
		if r := e.do("POST", "/api/v1/notifications/"+items[0]["id"].(string)+"/read", carol, nil, nil); r.Status != 404 {
			t.Fatalf("carol reads bob's: %d", r.Status)
		}
		if r := e.do("POST", "/api/v1/notifications/"+items[0]["id"].(string)+"/read", bob, nil, nil); r.Status != 204 {
			t.Fatalf("read: %d %s", r.Status, r.Body)
		}
		if _, unread := e.inbox(bob); unread != 0 {
			t.Fatalf("unread after reading: %d", unread)
		}
		if r := e.do("GET", "/api/v1/notifications?status=unread", bob, nil, nil); r.Status != 200 || len(r.JSON["items"].([]any)) != 0 {
			t.Fatalf("unread list: %s", r.Body)
		}
		assertError(t, e.do("GET", "/api/v1/notifications?status=new", bob, nil, nil), 400, "invalid_status")

		// Returned to the initiator: alice hears of it; resubmitted and approved: she hears it was approved.
		e.advance(time.Minute)
		if r := e.do("POST", "/api/v1/tasks/"+task+"/return", bob, M{"to": "start", "comment": "dates?"}, nil); r.Status != 200 {
			t.Fatalf("return: %s", r.Body)
		}
		e.settle()
		got, _ := e.inbox(alice)
		if len(got) != 1 || got[0]["event"] != "task.returned" || got[0]["message"] != "已退回：Annual leave" {
			t.Fatalf("alice after the return: %v", got)
		}
		e.advance(time.Minute)
		if r := e.do("POST", "/api/v1/tasks/"+got[0]["task_id"].(string)+"/approve", alice, M{}, nil); r.Status != 200 {
			t.Fatalf("resubmit: %s", r.Body)
		}
		e.settle()
		items, _ = e.inbox(bob)
		if len(items) != 2 || items[0]["event"] != "task.created" || items[0]["task_id"] == task {
			t.Fatalf("bob after the resubmit: %v", items)
		}
		e.advance(time.Minute)
		if r := e.do("POST", "/api/v1/tasks/"+items[0]["task_id"].(string)+"/approve", bob, M{}, nil); r.Status != 200 {
			t.Fatalf("approve: %s", r.Body)
		}
		e.settle()
		got, unread = e.inbox(alice)
		if len(got) != 2 || got[0]["event"] != "instance.completed" || got[0]["link"] != "/instances/"+inst || unread != 2 {
			t.Fatalf("alice at the end: %d %v", unread, got)
		}
		if r := e.do("POST", "/api/v1/notifications/read-all", alice, nil, nil); r.Status != 200 || r.JSON["read"] != float64(2) {
			t.Fatalf("read-all: %s", r.Body)
		}
		if bodies, _ := hook.got(); len(bodies) != 2 { // task.returned goes to the app only: the settings name no channel for it
			t.Fatalf("webhook got %d messages, want 2 task.created for bob and none else", len(bodies))
		}
		d := e.do("GET", "/api/v1/notification-deliveries?status=delivered", e.admin, nil, nil)
		if d.Status != 200 || len(d.JSON["items"].([]any)) != 2 {
			t.Fatalf("deliveries: %s", d.Body)
		}
		assertError(t, e.do("GET", "/api/v1/notification-deliveries", bob, nil, nil), 403, "")
		assertError(t, e.do("GET", "/api/v1/notification-deliveries?status=lost", e.admin, nil, nil), 400, "invalid_status")
	})
}

func TestApprovalTimeoutRemindsThroughNotifications(t *testing.T) {
	e := newNotifyEnv(t, storetest.Open(t, store.SQLite))
	bob := e.mkUser("bob")
	e.publish("remind", []any{start(M{"kind": "manual"}),
		M{"id": "lead", "type": "approval", "name": "Lead", "approvers": M{"users": []string{"bob"}}, "timeout": "1h", "on_timeout": "remind"},
		M{"id": "end", "type": "end"}}, []any{edge("start", "lead"), edge("lead", "end")})
	if r := e.do("POST", "/api/v1/instances", e.admin, M{"template": "remind", "title": "VPN"}, nil); r.Status != 201 {
		t.Fatalf("start: %s", r.Body)
	}
	e.settle()
	e.advance(61 * time.Minute)
	if n := e.fireDue(); n != 1 {
		t.Fatalf("fired %d", n)
	}
	e.settle()
	items, unread := e.inbox(bob)
	if unread != 2 || items[0]["event"] != "task.reminded" || items[0]["message"] != "审批提醒：VPN" {
		t.Fatalf("bob: %v", items)
	}
}

// TestChannelSecretsNeverLeave: secrets and robot URLs appear in no answer (create, list, audit, delivery log,
// errors) and in no log line.
func TestChannelSecretsNeverLeave(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		e := newNotifyEnv(t, s)
		secrets := []string{"smtp-password-1", "SECding-secret-2", "ding-access-token-3", "feishu-hook-id-4", "feishu-secret-5", "wecom-key-6",
			"hook-secret-7", "hook-token-8"}
		hook := newHookReceiver(t, 500)
		var answers []string
		keep := func(r resp) resp { answers = append(answers, string(r.Body)); return r }
		for _, c := range []M{
			{"name": "mail", "kind": "smtp", "config": M{"host": "smtp.example.com", "from": "halley@example.com", "username": "halley", "password": "smtp-password-1"}},
			{"name": "ding", "kind": "dingtalk", "config": M{"webhook_url": "https://oapi.dingtalk.com/robot/send?access_token=ding-access-token-3", "secret": "SECding-secret-2"}},
			{"name": "fei", "kind": "feishu", "config": M{"webhook_url": "https://open.feishu.cn/open-apis/bot/v2/hook/feishu-hook-id-4", "secret": "feishu-secret-5"}},
			{"name": "wecom", "kind": "wecom", "config": M{"webhook_url": "https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key=wecom-key-6"}},
			{"name": "hook", "kind": "webhook", "config": M{"url": hook.URL + "/in?token=hook-token-8", "secret": "hook-secret-7"}},
		} {
			if r := keep(e.do("POST", "/api/v1/channels", e.admin, c, nil)); r.Status != 201 {
				t.Fatalf("create %v: %s", c["name"], r.Body)
			}
		}
		r := keep(e.do("GET", "/api/v1/channels", e.admin, nil, nil))
		if len(r.JSON["items"].([]any)) != 5 {
			t.Fatalf("channels: %s", r.Body)
		}
		ding := r.JSON["items"].([]any)[0].(M)
		if ding["name"] != "ding" || ding["config"].(M)["webhook_url"] != "https://oapi.dingtalk.com/***" || ding["config"].(M)["secret"] != "***" {
			t.Fatalf("masked config: %v", ding)
		}
		keep(e.do("POST", "/api/v1/channels", e.admin, M{"name": "hook", "kind": "webhook", "config": M{"url": hook.URL + "/x?token=hook-token-8", "secret": "hook-secret-7"}}, nil))
		keep(e.do("POST", "/api/v1/channels", e.admin, M{"name": "bad", "kind": "webhook", "config": M{"url": "ftp://x/hook-token-8", "secret": "hook-secret-7"}}, nil))
		if r := keep(e.do("POST", "/api/v1/channels/hook/test", e.admin, M{"to": "admin"}, nil)); r.Status != 502 || r.code() != "channel_test_failed" {
			t.Fatalf("test of a failing webhook: %d %s", r.Status, r.Body)
		}
		e.mkUser("bob")
		keep(e.do("PUT", "/api/v1/notification-settings", e.admin, M{"events": M{"task.created": []string{"hook"}}}, nil))
		e.publish("leave", []any{start(M{"kind": "manual"}), M{"id": "lead", "type": "approval", "approvers": M{"users": []string{"bob"}}},
			M{"id": "end", "type": "end"}}, []any{edge("start", "lead"), edge("lead", "end")})
		keep(e.do("POST", "/api/v1/instances", e.admin, M{"template": "leave"}, nil))
		e.settle() // the webhook answers 500: the attempt fails and is logged (the robots' real hosts are never called)
		d := keep(e.do("GET", "/api/v1/notification-deliveries", e.admin, nil, nil))
		if len(d.JSON["items"].([]any)) != 1 {
			t.Fatalf("deliveries: %s", d.Body)
		}
		if r := keep(e.do("DELETE", "/api/v1/channels/fei", e.admin, nil, nil)); r.Status != 204 {
			t.Fatalf("delete: %d %s", r.Status, r.Body)
		}
		a := keep(e.do("GET", "/api/v1/audit?action=channel.*", e.admin, nil, nil))
		if len(a.JSON["items"].([]any)) != 6 { // 5 created, 1 deleted
			t.Fatalf("audit: %s", a.Body)
		}
		if got := a.JSON["items"].([]any)[0].(M); got["action"] != "channel.delete" || got["target"] != "fei" ||
			got["before"].(M)["config"].(M)["secret"] != "***" {
			t.Fatalf("audit of the delete: %v", got)
		}
		keep(e.do("GET", "/api/v1/audit?action=notification_settings.update", e.admin, nil, nil))
		var rows []string
		for _, q := range []string{"SELECT config FROM notification_channels", "SELECT secrets FROM notification_channels"} {
			rs, err := s.DB().Raw(q).Rows()
			if err != nil {
				t.Fatal(err)
			}
			for rs.Next() {
				var v string
				_ = rs.Scan(&v)
				rows = append(rows, v)
			}
			_ = rs.Close()
		}
		all := strings.Join(answers, "\n") + "\n" + e.logs.String() + "\n" + strings.Join(rows, "\n")
		for _, sec := range secrets {
			if strings.Contains(all, sec) {
				i := strings.Index(all, sec)
				t.Errorf("secret %q is in an answer, a log line or a stored column: …%s…", sec, all[max(0, i-200):min(len(all), i+50)])
			}
		}
		if !strings.Contains(e.logs.String(), "notification delivery failed; will retry") {
			t.Fatal("the failed deliveries were not logged (the check above looked at nothing)")
		}
		if !strings.HasPrefix(rows[len(rows)-1], "sealed:v1:") {
			t.Fatalf("a stored config is not sealed: %q", rows[len(rows)-1])
		}
	})
}

// TestInStepNotificationsMatchTheOutbox: a step writes the in-app notifications and channel deliveries of its
// events itself when notify's cache holds the users and settings (no outbox row, nothing to dispatch), and they are
// the rows the outbox path writes for the same events — every event notify tells of, recipients in both
// languages, per-language labels, a disabled recipient, a channel. The same flow runs twice on one clock: through
// the outbox only (CacheTTL < 0), then in the step with the cache preloaded before each step.
func TestInStepNotificationsMatchTheOutbox(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		base := time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)
		viaOutbox := runNotifiedFlow(t, s, base, false)
		inStep := runNotifiedFlow(t, storetest.Open(t, s.Dialect()), base, true)
		if len(viaOutbox) < 10 {
			t.Fatalf("the flow notified too little: %q", viaOutbox)
		}
		if strings.Join(viaOutbox, "\n") != strings.Join(inStep, "\n") {
			t.Fatalf("in-step rows differ from the outbox's:\noutbox:\n%s\nin step:\n%s", strings.Join(viaOutbox, "\n"), strings.Join(inStep, "\n"))
		}
	})
}

// runNotifiedFlow runs an approval flow that raises every notified event and returns each notification and
// delivery as a line (ids, keys and times left out), sorted.
func runNotifiedFlow(t *testing.T, s *store.Store, base time.Time, inStep bool) []string {
	t.Helper()
	ctx := context.Background()
	clk := &testClock{t: base}
	ttl := time.Duration(-1)
	if inStep {
		ttl = 0 // the default
	}
	svc, err := notify.New(notify.Deps{Store: s, Links: notify.WebLinks("http://halley.test"), Outbound: loopbackOutbound(t), SecretKey: []byte("k")},
		notify.Options{Clock: clk, Jitter: func() float64 { return 0 }, CacheTTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnvWith(t, s, wiring{clock: clk, notify: svc}, nil)
	none := func(context.Context, []model.OutboxItem) error { return nil }
	disp := newDispatcher(t, s, outbox.Handlers{model.OutboxEvent: svc.HandleEvents, model.OutboxTimerArm: none, model.OutboxTimerCancel: none,
		model.OutboxPluginRun: none}, outbox.Options{})
	users := []string{"admin", "alice", "bob", "carol", "dave"}
	alice, bob := e.mkUser("alice"), e.mkUser("bob")
	e.mkUser("carol")
	e.mkUser("dave")
	for _, r := range []resp{
		e.do("PUT", "/api/v1/me", bob, M{"language": "en", "email": "bob@example.com"}, nil),
		e.do("PATCH", "/api/v1/users/carol", e.admin, M{"display_name": "Carol Li"}, nil),
		e.do("PATCH", "/api/v1/users/dave", e.admin, M{"disabled": true}, nil),
	} {
		if r.Status != 200 {
			t.Fatalf("users: %s", r.Body)
		}
	}
	hook := newHookReceiver(t, 200)
	if r := e.do("POST", "/api/v1/channels", e.admin, M{"name": "hook", "kind": "webhook", "config": M{"url": hook.URL + "/in", "secret": "hook-secret-7"}}, nil); r.Status != 201 {
		t.Fatalf("channel: %s", r.Body)
	}
	if r := e.do("PUT", "/api/v1/notification-settings", e.admin, M{"language": "zh-CN", "events": M{"task.created": []string{"hook"},
		"cc.created": []string{"hook"}, "instance.completed": []string{"hook"}, "instance.rejected": []string{"hook"}, "task.urged": []string{"hook"}}}, nil); r.Status != 200 {
		t.Fatalf("settings: %s", r.Body)
	}
	def := M{"i18n": M{"en": M{"name": "Leave"}, "zh-CN": M{"name": "请假"}}, "nodes": []any{start(M{"kind": "manual"}),
		M{"id": "lead", "type": "approval", "name": "Lead", "i18n": M{"en": M{"name": "Team lead"}, "zh-CN": M{"name": "组长"}},
			"approvers": M{"users": []string{"bob"}}, "cc": M{"users": []string{"carol", "dave"}}, "timeout": "1h", "on_timeout": "remind"},
		M{"id": "end", "type": "end"}}, "edges": []any{edge("start", "lead"), edge("lead", "end")}}
	if r := e.do("POST", "/api/v1/templates", e.admin, M{"key": "leave", "name": "leave", "definition": def}, nil); r.Status != 201 || r.JSON["validation"].(M)["valid"] != true {
		t.Fatalf("template: %s", r.Body)
	}
	if r := e.do("POST", "/api/v1/templates/leave/publish", e.admin, nil, nil); r.Status != 201 {
		t.Fatalf("publish: %s", r.Body)
	}
	// step runs one step with the cache warm (in-step) and checks where its events went.
	step := func(what string, do func() resp) resp {
		t.Helper()
		if inStep {
			if err := svc.Preload(ctx, model.DefaultTenant, users...); err != nil {
				t.Fatal(err)
			}
		}
		r := do()
		if r.Status >= 300 {
			t.Fatalf("%s: %d %s", what, r.Status, r.Body)
		}
		var events int64
		if err := s.DB().Table("outbox").Where("kind = ?", model.OutboxEvent).Count(&events).Error; err != nil {
			t.Fatal(err)
		}
		if inStep && events != 0 {
			t.Fatalf("%s: %d event rows in the outbox; the step should have written its notifications itself", what, events)
		}
		if !inStep && events == 0 {
			t.Fatalf("%s: no event row in the outbox", what)
		}
		dispatch(t, disp)
		e.advance(time.Minute)
		return r
	}
	r := step("start", func() resp {
		return e.do("POST", "/api/v1/instances", alice, M{"template": "leave", "title": "Annual leave"}, nil)
	})
	inst := r.JSON["id"].(string)
	step("urge", func() resp {
		return e.do("POST", "/api/v1/instances/"+inst+"/urge", alice, M{"comment": "please <b>now</b>"}, nil)
	})
	e.advance(time.Hour)
	step("remind", func() resp {
		if n := e.fireDue(); n != 1 {
			t.Fatalf("fired %d", n)
		}
		return resp{Status: 200}
	})
	task := func(who string) string {
		t.Helper()
		r := e.do("GET", "/api/v1/tasks?status=pending", who, nil, nil)
		items := r.JSON["items"].([]any)
		if len(items) != 1 {
			t.Fatalf("%s's pending tasks: %s", who, r.Body)
		}
		return items[0].(M)["id"].(string)
	}
	step("return", func() resp {
		return e.do("POST", "/api/v1/tasks/"+task(bob)+"/return", bob, M{"to": "start", "comment": "dates?"}, nil)
	})
	step("resubmit", func() resp { return e.do("POST", "/api/v1/tasks/"+task(alice)+"/approve", alice, M{}, nil) })
	step("approve", func() resp { return e.do("POST", "/api/v1/tasks/"+task(bob)+"/approve", bob, M{}, nil) })
	inst2 := step("start 2", func() resp {
		return e.do("POST", "/api/v1/instances", alice, M{"template": "leave", "title": "Second"}, nil)
	}).JSON["id"].(string)
	step("reject", func() resp { return e.do("POST", "/api/v1/tasks/"+task(bob)+"/reject", bob, M{"comment": "no"}, nil) })

	var lines []string
	var ns []*model.Notification
	for _, u := range users {
		got, _, err := s.ListNotifications(ctx, model.NotificationFilter{TenantID: model.DefaultTenant, Username: u, Page: model.Page{Limit: 100}})
		if err != nil {
			t.Fatal(err)
		}
		ns = append(ns, got...)
	}
	ids := strings.NewReplacer(inst, "<inst>", inst2, "<inst2>")
	for _, n := range ns {
		if !strings.HasSuffix(n.Key, "/"+n.Event) {
			t.Fatalf("notification key %q", n.Key)
		}
		lines = append(lines, ids.Replace(fmt.Sprintf("in-app %s %s %q %q %q %s task:%v at:%s", n.Username, n.Event, n.Title, n.NodeName, n.Message, n.Link, n.TaskID != "",
			n.At.Sub(base))))
	}
	ds, _, err := s.ListNotificationDeliveries(ctx, model.DefaultTenant, "", model.Page{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ds {
		var m map[string]any
		if err := json.Unmarshal(d.Message, &m); err != nil {
			t.Fatal(err)
		}
		delete(m, "at")
		msg, _ := json.Marshal(m)
		lines = append(lines, ids.Replace(fmt.Sprintf("delivery %s %s %s %s %s", d.Channel, d.Recipient, d.Event, d.Status, msg)))
	}
	sort.Strings(lines)
	return lines
}
