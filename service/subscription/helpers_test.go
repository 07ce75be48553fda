package subscription_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/halley-bpm/halley/internal/testkit"
	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/clock"
	"github.com/halley-bpm/halley/service/outbound"
	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/subscription"
)

var admin = &model.Principal{TenantID: model.DefaultTenant, Username: "admin", Roles: []string{model.RoleAdmin}}

var t0 = time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)

// fixture is a service over a real store with a fake clock and constant jitter.
type fixture struct {
	t     *testing.T
	store *store.Store
	clock *clock.Fake
	svc   *subscription.Service
	seq   int64
}

func newFixture(t *testing.T, s *store.Store, mod func(*subscription.Options)) *fixture {
	t.Helper()
	f := &fixture{t: t, store: s, clock: clock.NewFake(t0)}
	// The receivers are httptest servers on 127.0.0.1: the tests allow loopback explicitly, as an operator
	// would with HALLEY_OUTBOUND_ALLOW; the default refuses it.
	opts := subscription.Options{Clock: f.clock, Logger: testkit.Quiet(), Jitter: func() float64 { return 0.5 }, Timeout: 5 * time.Second,
		Outbound: loopbackAllowed(t)}
	if mod != nil {
		mod(&opts)
	}
	f.svc = subscription.New(s, opts)
	if err := s.CreateTemplate(context.Background(), &model.Template{TenantID: model.DefaultTenant, Key: "leave", Name: "Leave", Draft: []byte("{}"), CreatedBy: "admin"}); err != nil {
		t.Fatal(err)
	}
	return f
}

// loopbackAllowed is the outbound client of a deployment with HALLEY_OUTBOUND_ALLOW=127.0.0.1.
func loopbackAllowed(t *testing.T) *outbound.Client {
	t.Helper()
	allow, err := outbound.ParseAllow("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	return outbound.New(outbound.Options{Allow: allow})
}

func (f *fixture) subscribe(req subscription.CreateRequest) *model.Subscription {
	f.t.Helper()
	sub, err := f.svc.Create(context.Background(), admin, req)
	if err != nil {
		f.t.Fatalf("subscribe %+v: %v", req, err)
	}
	return sub
}

// event returns an event outbox item as the engine writes it.
func (f *fixture) event(name, template string, task *model.Task) model.OutboxItem {
	f.seq++
	payload, _ := json.Marshal(map[string]any{"event": name, "at": t0, "instance_id": "inst-1", "template": template,
		"status": model.StatusRunning, "node_id": "lead", "task": task})
	return model.OutboxItem{Seq: f.seq, TenantID: model.DefaultTenant, Kind: model.OutboxEvent, Ref: name, Payload: payload, CreatedAt: t0}
}

func (f *fixture) handle(items ...model.OutboxItem) {
	f.t.Helper()
	if err := f.svc.HandleEvents(context.Background(), items); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) deliverOnce() int {
	f.t.Helper()
	n, err := f.svc.DeliverOnce(context.Background())
	if err != nil {
		f.t.Fatal(err)
	}
	return n
}

func (f *fixture) deliveries(subID string) []*model.Delivery {
	f.t.Helper()
	ds, _, err := f.svc.Deliveries(context.Background(), model.DefaultTenant, subID, model.Page{Limit: 100})
	if err != nil {
		f.t.Fatal(err)
	}
	return ds
}

// receiver is a webhook endpoint that records what it got and answers with the next status of its script
// (the last one repeats).
type receiver struct {
	*httptest.Server
	mu       sync.Mutex
	requests []received
	script   []int
	got      chan struct{}
}

type received struct {
	Header http.Header
	Body   []byte
}

func newReceiver(t *testing.T, script ...int) *receiver {
	t.Helper()
	r := &receiver{script: script, got: make(chan struct{}, 100)}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.requests = append(r.requests, received{Header: req.Header.Clone(), Body: b})
		status := 200
		if len(r.script) > 0 {
			status = r.script[min(len(r.requests), len(r.script))-1]
		}
		r.mu.Unlock()
		w.WriteHeader(status)
		_, _ = io.WriteString(w, "answer from the receiver")
		r.got <- struct{}{}
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.requests)
}

func (r *receiver) request(i int) received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.requests[i]
}
