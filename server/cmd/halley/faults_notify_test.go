package main

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/halley-bpm/halley/internal/testkit"
)

// TestFaultKillBetweenCommitAndSend: a step commits a task, and so its notification and the delivery to a
// webhook channel; halley is killed (SIGKILL) while the message is on its way, before the receiver answered.
// After the restart the delivery is sent again once its lease ran out, and only once: the receiver accepts
// exactly one message, the delivery log says delivered at the second attempt, and the in-app notification
// exists once.
func TestFaultKillBetweenCommitAndSend(t *testing.T) {
	requireFaults(t)
	t.Parallel()
	bin := buildHalley(t)

	var mu sync.Mutex
	requests, accepted := 0, 0
	arrived, release := make(chan struct{}), make(chan struct{})
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		requests++
		first := requests == 1
		mu.Unlock()
		if first {
			close(arrived)
			<-release // halley is killed meanwhile: this answer goes nowhere
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		mu.Lock()
		accepted++
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer hook.Close()
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()

	h := startHalley(t, "halley", bin, faultEnv("HALLEY_OUTBOUND_ALLOW=127.0.0.1", "HALLEY_NOTIFY_TIMEOUT=2s")...)
	cl := newAPI()
	cl.login(t, h.URL())
	cl.mustCall(t, h.URL(), "POST", "/api/v1/users", map[string]any{"username": "bob", "password": "bob-password-1"})
	cl.mustCall(t, h.URL(), "POST", "/api/v1/channels", map[string]any{"name": "hook", "kind": "webhook", "config": map[string]any{"url": hook.URL + "/in"}})
	cl.mustCall(t, h.URL(), "PUT", "/api/v1/notification-settings", map[string]any{"events": map[string]any{"task.created": []string{"hook"}}})
	cl.publish(t, h.URL(), "faults-notify", approvalsDefinition(1))
	inst := cl.mustCall(t, h.URL(), "POST", "/api/v1/instances", map[string]any{"template": "faults-notify", "context": map[string]any{"approver": "bob"}})

	select {
	case <-arrived:
	case <-time.After(30 * time.Second):
		t.Fatal("the notification never reached the webhook")
	}
	h.kill()
	close(release)
	h.start()

	if !testkit.Eventually(30*time.Second, 50*time.Millisecond, func() bool { mu.Lock(); defer mu.Unlock(); return accepted == 1 }) {
		t.Fatalf("after the restart the webhook accepted %d messages, want 1", accepted)
	}
	time.Sleep(3 * time.Second) // a second send would come within the poll interval
	mu.Lock()
	if requests != 2 || accepted != 1 {
		t.Fatalf("the webhook got %d requests and accepted %d; want 2 and 1", requests, accepted)
	}
	mu.Unlock()
	log := cl.mustCall(t, h.URL(), "GET", "/api/v1/notification-deliveries", nil)["items"].([]any)
	if len(log) != 1 {
		t.Fatalf("delivery log: %v", log)
	}
	if d := log[0].(map[string]any); d["status"] != "delivered" || d["attempts"] != float64(2) || d["instance_id"] != inst["id"] {
		t.Fatalf("delivery: %v", d)
	}
	bob := newAPI()
	bob.token = cl.mustCall(t, h.URL(), "POST", "/api/v1/auth/login", map[string]string{"username": "bob", "password": "bob-password-1"})["token"].(string)
	if items := bob.mustCall(t, h.URL(), "GET", "/api/v1/notifications", nil)["items"].([]any); len(items) != 1 {
		t.Fatalf("bob's notifications: %v", items)
	}
}
