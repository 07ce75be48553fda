package notify_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/engine"
	"github.com/halley-bpm/halley/service/engine/enginetest"
	"github.com/halley-bpm/halley/service/notify"
	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
	"github.com/halley-bpm/halley/service/template"
)

// labelledDef has labels in both languages on the template, its title pattern and its approval node.
const labelledDef = `{"title_pattern":"{initiator}: {days} days off",
 "i18n":{"zh-CN":{"name":"请假申请","title_pattern":"{initiator} 请假 {days} 天"},"en":{"name":"Leave request","title_pattern":"{initiator} asks for {days} days"}},
 "nodes":[
	{"id":"start","type":"start","trigger":{"kind":"manual"}},
	{"id":"lead","type":"approval","name":"Lead","i18n":{"zh-CN":{"name":"直属上级审批"},"en":{"name":"Team lead"}},"approvers":{"users":["li","bob"]},"sign":"all"},
	{"id":"end","type":"end"}],
 "edges":[{"from":"start","to":"lead"},{"from":"lead","to":"end"}]}`

// plainDef is the same process without any label.
const plainDef = `{"title_pattern":"{initiator}: {days} days off",
 "nodes":[
	{"id":"start","type":"start","trigger":{"kind":"manual"}},
	{"id":"lead","type":"approval","name":"Lead","approvers":{"users":["li","bob"]},"sign":"all"},
	{"id":"end","type":"end"}],
 "edges":[{"from":"start","to":"lead"},{"from":"lead","to":"end"}]}`

// TestMessagesNameStepsAndTitlesInTheRecipientsLanguage: the engine's events carry the texts of each language,
// and each recipient's notification (in the app and through a channel) names the step, the title and the
// template in their language; a template without labels gives everyone the plain names.
func TestMessagesNameStepsAndTitlesInTheRecipientsLanguage(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		f := newFixture(t, s, "127.0.0.1")
		var mu sync.Mutex
		got := map[string]notify.Message{}
		hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var m notify.Message
			_ = json.Unmarshal(readAll(t, r.Body), &m)
			mu.Lock()
			got[m.To.Username+" "+m.InstanceID] = m
			mu.Unlock()
		}))
		defer hook.Close()
		f.user(&model.User{Username: "alice", DisplayName: "Alice"})
		f.user(&model.User{Username: "li", DisplayName: "李雷", Language: "zh-CN"})
		f.user(&model.User{Username: "bob", DisplayName: "Bob", Language: "en"})
		f.channel("hook", model.ChannelWebhook, map[string]any{"url": hook.URL})
		f.settings(&model.NotificationSettings{Language: "en", Events: map[string][]string{model.NotifyTaskCreated: {"hook"}},
			Templates: map[string]map[string]model.MessageTemplate{
				model.NotifyTaskCreated: {
					"en":    {Subject: "{{.TemplateName}}: {{.Title}}", Body: "{{.Step}}"},
					"zh-CN": {Subject: "{{.TemplateName}}：{{.Title}}", Body: "{{.Step}}"},
				}}})

		tpl := template.New(s, template.Options{Clock: f.clk})
		deps := enginetest.Deps(t, s, tpl, s)
		deps.Events = f.svc
		eng, err := engine.New(deps, engine.Options{Clock: f.clk, CallbackKey: []byte("callback-key-for-tests")})
		if err != nil {
			t.Fatal(err)
		}
		start := func(key, def string) string {
			t.Helper()
			if _, err := tpl.Create(ctx, admin, template.CreateRequest{Key: key, Name: key + " template", Definition: json.RawMessage(def)}); err != nil {
				t.Fatalf("create %s: %v", key, err)
			}
			if _, err := tpl.Publish(ctx, admin, key); err != nil {
				t.Fatalf("publish %s: %v", key, err)
			}
			v, err := eng.Start(ctx, &model.Principal{TenantID: model.DefaultTenant, Username: "alice"},
				engine.StartParams{Template: key, Context: json.RawMessage(`{"days":3}`)})
			if err != nil {
				t.Fatalf("start %s: %v", key, err)
			}
			return v.ID
		}
		labelled, plain := start("leave", labelledDef), start("plain", plainDef)
		f.dispatch()
		f.deliver()

		inApp := func(user, instance string) *model.Notification {
			t.Helper()
			items, _ := f.inbox(user)
			for _, n := range items {
				if n.InstanceID == instance {
					return n
				}
			}
			t.Fatalf("%s has no notification of %s: %+v", user, instance, items)
			return nil
		}
		for _, tc := range []struct {
			user, instance             string
			title, step, subject, lang string
		}{
			{"li", labelled, "Alice 请假 3 天", "直属上级审批", "请假申请：Alice 请假 3 天", "zh-CN"},
			{"bob", labelled, "Alice asks for 3 days", "Team lead", "Leave request: Alice asks for 3 days", "en"},
			{"li", plain, "Alice: 3 days off", "Lead", "plain template：Alice: 3 days off", "zh-CN"},
			{"bob", plain, "Alice: 3 days off", "Lead", "plain template: Alice: 3 days off", "en"},
		} {
			n := inApp(tc.user, tc.instance)
			if n.Title != tc.title || n.NodeName != tc.step || n.Message != tc.subject {
				t.Errorf("%s's in-app notification of %s: title %q, step %q, message %q; want %q, %q, %q",
					tc.user, tc.instance, n.Title, n.NodeName, n.Message, tc.title, tc.step, tc.subject)
			}
			mu.Lock()
			m, ok := got[tc.user+" "+tc.instance]
			mu.Unlock()
			if !ok {
				t.Errorf("no channel message to %s of %s", tc.user, tc.instance)
				continue
			}
			if m.Lang != tc.lang || m.Title != tc.title || m.Step != tc.step || m.Subject != tc.subject || m.Text != tc.step {
				t.Errorf("%s's channel message of %s: %+v", tc.user, tc.instance, m)
			}
		}
	})
}
