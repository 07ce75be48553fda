package notify_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/notify"
	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
)

// TestRateLimitUnderABurst: 100 new tasks at once for a DingTalk robot (20 messages a minute), sent by two
// replicas polling together: every message arrives exactly once, never more than 20 in any minute, and the
// queue drains as fast as the rate allows.
func TestRateLimitUnderABurst(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		f := newFixture(t, s, "127.0.0.1")
		other := f.service("127.0.0.1") // a second replica on the same database
		var mu sync.Mutex
		var sent []int64
		tasks := map[string]int{}
		ding := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var m struct {
				Markdown struct{ Text string } `json:"markdown"`
			}
			_ = json.Unmarshal(readAll(t, r.Body), &m)
			ms, _ := strconv.ParseInt(r.URL.Query().Get("timestamp"), 10, 64)
			mu.Lock()
			sent = append(sent, ms)
			for i := range 100 {
				if strings.Contains(m.Markdown.Text, fmt.Sprintf("/m/tasks/t-%d-", i+1)) {
					tasks[strconv.Itoa(i)]++
				}
			}
			mu.Unlock()
			_, _ = w.Write([]byte(`{"errcode":0,"errmsg":"ok"}`))
		}))
		defer ding.Close()
		f.user(&model.User{Username: "bob"})
		f.channel("ding", model.ChannelDingTalk, map[string]any{"webhook_url": ding.URL + "/robot/send?access_token=t", "secret": "SECx"})
		f.settings(&model.NotificationSettings{Events: map[string][]string{model.NotifyTaskCreated: {"ding"}}})
		for range 100 {
			f.commit(f.taskCreated("bob", model.TaskKindApproval, 0))
		}
		f.dispatch()
		if n := len(f.deliveries(model.DeliveryPending)); n != 100 {
			t.Fatalf("%d pending deliveries, want 100", n)
		}

		start := f.clk.Now()
		var waits []time.Duration
		for step := 0; step < 400; step++ {
			var wg sync.WaitGroup
			for _, svc := range []*notify.Service{f.svc, other} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					w, err := svc.DeliverOnce(context.Background())
					if err != nil {
						t.Error(err)
					}
					mu.Lock()
					waits = append(waits, w)
					mu.Unlock()
				}()
			}
			wg.Wait()
			mu.Lock()
			done := len(sent) >= 100
			mu.Unlock()
			if done {
				break
			}
			f.clk.Advance(time.Second)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(sent) != 100 || len(tasks) != 100 {
			t.Fatalf("the robot got %d messages for %d tasks, want 100 and 100", len(sent), len(tasks))
		}
		for id, n := range tasks {
			if n != 1 {
				t.Errorf("task %s was sent %d times", id, n)
			}
		}
		slices.Sort(sent)
		for i := 20; i < len(sent); i++ {
			if gap := time.Duration(sent[i]-sent[i-20]) * time.Millisecond; gap < time.Minute {
				t.Fatalf("messages %d and %d are %v apart: more than 20 within a minute", i-20, i, gap)
			}
		}
		if took := time.UnixMilli(sent[99]).Sub(start); took > 4*time.Minute+5*time.Second {
			t.Errorf("the last message went out %v after the burst; the rate allows 4 min", took)
		}
		// The loop goes on at once only after a full batch (10 messages): never while the rate holds it back.
		if zero := len(waits) - len(slices.DeleteFunc(slices.Clone(waits), func(w time.Duration) bool { return w == 0 })); zero > 10 {
			t.Errorf("the loop was told %d times to go on at once; 100 messages make at most 10 full batches", zero)
		}
		if n := len(f.deliveries(model.DeliveryDelivered)); n != 100 {
			t.Errorf("%d delivered in the log, want 100", n)
		}
	})
}

// counter is a FailureCounter.
type counter struct {
	mu     sync.Mutex
	byKind map[string]int
}

func (c *counter) DeliveryFailed(kind string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.byKind[kind]++
}

// TestFailingChannelRecovers: a webhook that answers 500 twice and then 200 gets the message at the third
// attempt, after the back-off; the log shows the attempts and the last error. A channel that never recovers is
// given up after MaxAttempts, counted by kind.
func TestFailingChannelRecovers(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		f := newFixture(t, s, "127.0.0.1")
		var mu sync.Mutex
		calls := 0
		hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			calls++
			n := calls
			mu.Unlock()
			if n <= 2 {
				http.Error(w, "receiver down for maintenance", http.StatusInternalServerError)
				return
			}
			w.WriteHeader(http.StatusNoContent)
		}))
		defer hook.Close()
		f.user(&model.User{Username: "bob"})
		f.channel("hook", model.ChannelWebhook, map[string]any{"url": hook.URL})
		f.settings(&model.NotificationSettings{Events: map[string][]string{model.NotifyTaskCreated: {"hook"}}})
		f.event(f.taskCreated("bob", model.TaskKindApproval, 0))

		f.deliver()
		d := f.deliveries("")[0]
		if d.Status != model.DeliveryPending || d.Attempts != 1 || d.LastError != "POST http://"+hook.Listener.Addr().String()+": HTTP 500 receiver down for maintenance" ||
			!d.NextAttemptAt.Equal(f.clk.Now().Add(10*time.Second)) {
			t.Fatalf("after attempt 1: %+v", d)
		}
		f.clk.Advance(9 * time.Second)
		f.deliver()
		if calls != 1 {
			t.Fatalf("attempt 2 came before its back-off (%d calls)", calls)
		}
		f.clk.Advance(time.Second)
		f.deliver() // attempt 2 fails: next in a minute
		if d := f.deliveries("")[0]; d.Attempts != 2 || d.Status != model.DeliveryPending || !d.NextAttemptAt.Equal(f.clk.Now().Add(time.Minute)) {
			t.Fatalf("after attempt 2: %+v", d)
		}
		f.clk.Advance(time.Minute)
		f.deliver()
		if d := f.deliveries("")[0]; d.Status != model.DeliveryDelivered || d.Attempts != 3 || d.FinishedAt == nil || calls != 3 {
			t.Fatalf("after attempt 3: %+v (%d calls)", d, calls)
		}
		if !strings.Contains(f.logs.String(), "notification delivery failed; will retry") {
			t.Error("the failed attempts were not logged")
		}

		// Never recovering: failed after 2 attempts, counted as a failed webhook delivery.
		hook.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.Error(w, "gone", http.StatusBadGateway) })
		c := &counter{byKind: map[string]int{}}
		giveUp := f.service("127.0.0.1", func(d *notify.Deps, o *notify.Options) { o.MaxAttempts, d.Failures = 2, c })
		f.event(f.taskCreated("bob", model.TaskKindApproval, 0))
		f.deliver(giveUp)
		f.clk.Advance(10 * time.Second)
		f.deliver(giveUp)
		failed := f.deliveries(model.DeliveryFailed)
		if len(failed) != 1 || failed[0].Attempts != 2 || !strings.Contains(failed[0].LastError, "HTTP 502 gone") || c.byKind[model.ChannelWebhook] != 1 {
			t.Fatalf("given up: %+v, counted %v", failed, c.byKind)
		}
	})
}
