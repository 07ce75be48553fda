package notify_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
)

// robot is a local stand-in of an IM robot or webhook receiver: it checks each request as the vendor would and
// keeps what it accepted.
type robot struct {
	mu       sync.Mutex
	accepted []map[string]any
	rejected []string
	*httptest.Server
}

func (r *robot) got() []map[string]any {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]map[string]any(nil), r.accepted...)
}

// newRobot starts a receiver; check returns "" to accept a request (its raw query and body) or the vendor's
// refusal, and answer is the JSON written back for an accepted (ok) or refused one.
func newRobot(t *testing.T, check func(r *http.Request, body []byte) string, answer func(ok bool, why string) string) *robot {
	rb := &robot{}
	rb.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body := readAll(t, r.Body)
		why := check(r, body)
		rb.mu.Lock()
		if why == "" {
			var m map[string]any
			if err := json.Unmarshal(body, &m); err != nil {
				why = "not JSON"
			} else {
				rb.accepted = append(rb.accepted, m)
			}
		}
		if why != "" {
			rb.rejected = append(rb.rejected, why)
		}
		rb.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(answer(why == "", why)))
	}))
	t.Cleanup(rb.Close)
	return rb
}

func hmacB64(key, msg string) string {
	m := hmac.New(sha256.New, []byte(key))
	m.Write([]byte(msg))
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

func TestIMChannelsSignAsTheVendorsDocument(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		f := newFixture(t, s, "127.0.0.1")
		f.user(&model.User{Username: "bob", DisplayName: "Bob", Mobile: "13800001111", IMID: "ou_bob"})
		f.user(&model.User{Username: "carol", DisplayName: "Carol", Language: "en", IMID: "carol_id"})
		f.user(&model.User{Username: "alice", DisplayName: "Alice Wang"})
		const dingSecret, feishuSecret, hookSecret = "SECding+/=secret", "feishu-secret-xyz", "hook-secret-123"
		now := func() int64 { return f.clk.Now().UnixMilli() }

		// DingTalk: timestamp (ms) and sign = urlencode(base64(HMAC-SHA256(secret, timestamp+"\n"+secret))) in the
		// query, compared byte for byte with the raw query.
		ding := newRobot(t, func(r *http.Request, body []byte) string {
			q := r.URL.Query()
			if q.Get("access_token") != "ding-token" {
				return "310000 bad token"
			}
			ts := q.Get("timestamp")
			if ts != strconv.FormatInt(now(), 10) {
				return "310000 timestamp " + ts
			}
			want := "sign=" + url.QueryEscape(hmacB64(dingSecret, ts+"\n"+dingSecret))
			if !strings.Contains("&"+r.URL.RawQuery+"&", "&"+want+"&") {
				return "310000 sign not match: " + r.URL.RawQuery
			}
			return ""
		}, func(ok bool, why string) string {
			if ok {
				return `{"errcode":0,"errmsg":"ok"}`
			}
			return `{"errcode":310000,"errmsg":"sign not match"}`
		})
		// Feishu: timestamp (s) and sign = base64(HMAC-SHA256(key = timestamp+"\n"+secret, message = "")) in the body.
		feishu := newRobot(t, func(r *http.Request, body []byte) string {
			var b struct{ Timestamp, Sign string }
			_ = json.Unmarshal(body, &b)
			if b.Timestamp != strconv.FormatInt(now()/1000, 10) {
				return "timestamp " + b.Timestamp
			}
			if b.Sign != hmacB64(b.Timestamp+"\n"+feishuSecret, "") {
				return "sign " + b.Sign
			}
			return ""
		}, func(ok bool, why string) string {
			if ok {
				return `{"code":0,"msg":"success","data":{}}`
			}
			return `{"code":19021,"msg":"sign match fail or timestamp is not within one hour from current time"}`
		})
		wecom := newRobot(t, func(r *http.Request, body []byte) string {
			if r.URL.Query().Get("key") != "wecom-key" {
				return "invalid webhook url"
			}
			return ""
		}, func(ok bool, why string) string {
			if ok {
				return `{"errcode":0,"errmsg":"ok"}`
			}
			return `{"errcode":93000,"errmsg":"invalid webhook url"}`
		})
		hook := newRobot(t, func(r *http.Request, body []byte) string {
			m := hmac.New(sha256.New, []byte(hookSecret))
			m.Write(body)
			if r.Header.Get("X-Halley-Signature") != "sha256="+hex.EncodeToString(m.Sum(nil)) || r.Header.Get("X-Halley-Event") != "task.created" {
				return "bad signature"
			}
			return ""
		}, func(ok bool, why string) string { return `{}` })

		f.channel("ding", model.ChannelDingTalk, map[string]any{"webhook_url": ding.URL + "/robot/send?access_token=ding-token", "secret": dingSecret})
		f.channel("ding-wrong", model.ChannelDingTalk, map[string]any{"webhook_url": ding.URL + "/robot/send?access_token=ding-token", "secret": "SECwrong"})
		f.channel("fei", model.ChannelFeishu, map[string]any{"webhook_url": feishu.URL + "/open-apis/bot/v2/hook/feishu-hook-7f3c", "secret": feishuSecret})
		f.channel("wecom", model.ChannelWeCom, map[string]any{"webhook_url": wecom.URL + "/cgi-bin/webhook/send?key=wecom-key"})
		f.channel("hook", model.ChannelWebhook, map[string]any{"url": hook.URL + "/halley", "secret": hookSecret})
		f.settings(&model.NotificationSettings{Events: map[string][]string{model.NotifyTaskCreated: {"ding", "ding-wrong", "fei", "wecom", "hook"}}})

		bob, carol := f.taskCreated("bob", model.TaskKindApproval, 0), f.taskCreated("carol", model.TaskKindApproval, 0)
		f.event(bob, carol)
		f.deliver()

		bobTask := bob["task"].(map[string]any)["id"].(string)
		if got := ding.got(); len(got) != 2 {
			t.Fatalf("DingTalk accepted %d messages, want 2 (refused: %v)", len(got), ding.rejected)
		}
		for _, m := range ding.got() {
			text := m["markdown"].(map[string]any)["text"].(string)
			at, _ := m["at"].(map[string]any)
			switch {
			case strings.Contains(text, bobTask):
				if !strings.Contains(text, "待审批") || !strings.Contains(text, "https://halley.example.com/m/tasks/"+bobTask) ||
					!strings.Contains(text, "@13800001111") || !strings.Contains(text, "Alice Wang") {
					t.Errorf("DingTalk message to bob: %q", text)
				}
				if mobiles, _ := at["atMobiles"].([]any); len(mobiles) != 1 || mobiles[0] != "13800001111" {
					t.Errorf("DingTalk at: %v", at)
				}
			default:
				if !strings.Contains(text, "Approval needed") || !strings.Contains(text, "@carol_id") {
					t.Errorf("DingTalk message to carol: %q", text)
				}
			}
		}
		if len(ding.rejected) != 2 {
			t.Errorf("the robot refused %d requests of the channel with the wrong secret, want 2: %v", len(ding.rejected), ding.rejected)
		}
		fs := feishu.got()
		if len(fs) != 2 || len(feishu.rejected) != 0 {
			t.Fatalf("Feishu accepted %d, refused %v", len(fs), feishu.rejected)
		}
		for _, m := range fs {
			text := m["content"].(map[string]any)["text"].(string)
			if m["msg_type"] != "text" || (!strings.Contains(text, `<at user_id="ou_bob">Bob</at>`) && !strings.Contains(text, `<at user_id="carol_id">Carol</at>`)) {
				t.Errorf("Feishu message: %v", m)
			}
		}
		ws := wecom.got()
		if len(ws) != 2 {
			t.Fatalf("WeCom accepted %d, refused %v", len(ws), wecom.rejected)
		}
		for _, m := range ws {
			text := m["text"].(map[string]any)
			if m["msgtype"] != "text" || !strings.Contains(text["content"].(string), "https://halley.example.com/m/tasks/") {
				t.Errorf("WeCom message: %v", m)
			}
		}
		hs := hook.got()
		if len(hs) != 2 || len(hook.rejected) != 0 {
			t.Fatalf("webhook accepted %d, refused %v", len(hs), hook.rejected)
		}
		for _, m := range hs {
			to := m["to"].(map[string]any)
			if to["username"] == "bob" && (m["lang"] != "zh-CN" || m["link"] != "https://halley.example.com/tasks/"+bobTask) {
				t.Errorf("webhook message to bob: %v", m)
			}
		}

		// The log: 8 delivered at the first attempt; the wrong secret's 2 pending with DingTalk's refusal.
		if n := len(f.deliveries(model.DeliveryDelivered)); n != 8 {
			t.Errorf("%d delivered, want 8", n)
		}
		pending := f.deliveries(model.DeliveryPending)
		if len(pending) != 2 {
			t.Fatalf("%d pending, want 2", len(pending))
		}
		for _, d := range pending {
			if d.Channel != "ding-wrong" || d.Attempts != 1 || !strings.Contains(d.LastError, "DingTalk refused the message: code 310000") {
				t.Errorf("pending delivery: %+v", d)
			}
		}
		for _, secret := range []string{dingSecret, "SECwrong", feishuSecret, hookSecret, "ding-token", "wecom-key", "feishu-hook-7f3c"} {
			if strings.Contains(f.logs.String(), secret) {
				t.Errorf("a log line shows the secret %q", secret)
			}
		}
	})
}
