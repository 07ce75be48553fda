package notify_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"io"
	"log/slog"
	"math/big"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/clock"
	"github.com/halley-bpm/halley/service/notify"
	"github.com/halley-bpm/halley/service/outbound"
	"github.com/halley-bpm/halley/service/outbox"
	"github.com/halley-bpm/halley/service/store"
)

var admin = &model.Principal{TenantID: model.DefaultTenant, Username: "admin", Roles: []string{model.RoleAdmin}}

var t0 = time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)

// logBuffer collects every log line of a service, to look for secrets in them.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

type fixture struct {
	t    *testing.T
	st   *store.Store
	clk  *clock.Fake
	svc  *notify.Service
	disp *outbox.Dispatcher
	logs *logBuffer
	seq  atomic.Int64
}

const secretKey = "test-secret-key-of-halley"

// newFixture builds the service on st with a fake clock, an outbound client allowing allow (e.g. 127.0.0.1) and
// a dispatcher handing event rows to it. opts may tune it.
func newFixture(t *testing.T, st *store.Store, allow string, tune ...func(*notify.Deps, *notify.Options)) *fixture {
	t.Helper()
	f := &fixture{t: t, st: st, clk: clock.NewFake(t0), logs: &logBuffer{}}
	f.svc = f.service(allow, tune...)
	d, err := outbox.New(st, outbox.Handlers{model.OutboxEvent: f.svc.HandleEvents}, outbox.Options{Logger: slog.New(slog.NewTextHandler(f.logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	f.disp = d
	return f
}

// service builds another service on the same store and clock (another replica, or another allow list).
func (f *fixture) service(allow string, tune ...func(*notify.Deps, *notify.Options)) *notify.Service {
	f.t.Helper()
	a, err := outbound.ParseAllow(allow)
	if err != nil {
		f.t.Fatal(err)
	}
	opts := notify.Options{Clock: f.clk, Logger: slog.New(slog.NewTextHandler(f.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Timeout: 5 * time.Second, Jitter: func() float64 { return 0 }, TLSConfig: &tls.Config{RootCAs: testCA.pool, MinVersion: tls.VersionTLS12}}
	deps := notify.Deps{Store: f.st, Links: notify.WebLinks("https://halley.example.com"), Outbound: outbound.New(outbound.Options{Allow: a}),
		SecretKey: []byte(secretKey)}
	for _, fn := range tune {
		fn(&deps, &opts)
	}
	svc, err := notify.New(deps, opts)
	if err != nil {
		f.t.Fatal(err)
	}
	return svc
}

func (f *fixture) user(u *model.User) {
	f.t.Helper()
	if u.DisplayName == "" {
		u.DisplayName = u.Username
	}
	if err := f.st.CreateUser(context.Background(), u); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) channel(name, kind string, cfg map[string]any) *model.Channel {
	f.t.Helper()
	raw, _ := json.Marshal(cfg)
	ch, err := f.svc.CreateChannel(context.Background(), admin, notify.ChannelRequest{Name: name, Kind: kind, Config: raw})
	if err != nil {
		f.t.Fatalf("create channel %s: %v", name, err)
	}
	return ch
}

func (f *fixture) settings(st *model.NotificationSettings) {
	f.t.Helper()
	if _, err := f.svc.PutSettings(context.Background(), admin, st); err != nil {
		f.t.Fatalf("settings: %v", err)
	}
}

// event commits an instance with outbox event rows as the engine writes them (one transaction), and dispatches
// them to the service. Each event is a map of the engine's payload fields.
func (f *fixture) event(evs ...map[string]any) {
	f.t.Helper()
	f.commit(evs...)
	f.dispatch()
}

func (f *fixture) commit(evs ...map[string]any) {
	f.t.Helper()
	n := f.seq.Add(1)
	id := "i" + strconv.FormatInt(n, 10)
	now := f.clk.Now().UTC()
	w := &model.Work{Instance: &model.Instance{ID: id, TenantID: model.DefaultTenant, Template: "leave", Version: 1, Title: "Leave " + id,
		Status: model.StatusRunning, Initiator: "alice", Context: json.RawMessage(`{}`), CreatedAt: now, UpdatedAt: now,
		State: model.InstanceState{Nodes: map[string]*model.NodeVisit{}}}}
	for _, ev := range evs {
		ev["at"], ev["instance_id"], ev["template"] = now, id, "leave"
		if _, ok := ev["title"]; !ok {
			ev["title"] = "Leave " + id
		}
		if _, ok := ev["initiator"]; !ok {
			ev["initiator"] = "alice"
		}
		b, _ := json.Marshal(ev)
		w.Outbox = append(w.Outbox, model.OutboxItem{TenantID: model.DefaultTenant, Kind: model.OutboxEvent, Ref: ev["event"].(string), Payload: b})
	}
	if err := f.st.CreateInstance(context.Background(), w); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) dispatch() {
	f.t.Helper()
	for {
		n, err := f.disp.DispatchOnce(context.Background())
		if err != nil {
			f.t.Fatal(err)
		}
		if n == 0 {
			return
		}
	}
}

// taskCreated is the payload of a task.created event for assignee, created at the clock's time minus age.
func (f *fixture) taskCreated(assignee, kind string, age time.Duration) map[string]any {
	id := "t-" + strconv.FormatInt(f.seq.Load()+1, 10) + "-" + assignee
	return map[string]any{"event": "task.created", "node_id": "lead", "status": "running", "task": map[string]any{"id": id, "node_id": "lead",
		"node_name": "Team lead", "assignee": assignee, "status": "pending", "kind": kind, "created_at": f.clk.Now().Add(-age).UTC(), "initiator": "alice"}}
}

// deliver runs the delivery loop once at the clock's time.
func (f *fixture) deliver(svc ...*notify.Service) time.Duration {
	f.t.Helper()
	s := f.svc
	if len(svc) > 0 {
		s = svc[0]
	}
	wait, err := s.DeliverOnce(context.Background())
	if err != nil {
		f.t.Fatal(err)
	}
	return wait
}

func (f *fixture) deliveries(status string) []*model.NotificationDelivery {
	f.t.Helper()
	ds, _, err := f.svc.Deliveries(context.Background(), admin, status, model.Page{Limit: 200})
	if err != nil {
		f.t.Fatal(err)
	}
	return ds
}

func (f *fixture) inbox(user string) ([]*model.Notification, int) {
	f.t.Helper()
	items, _, unread, err := f.svc.Notifications(context.Background(), &model.Principal{TenantID: model.DefaultTenant, Username: user}, false, model.Page{Limit: 200})
	if err != nil {
		f.t.Fatal(err)
	}
	return items, unread
}

// testCA is a CA and a certificate for 127.0.0.1 signed by it, for the SMTP servers of the tests.
var testCA = newTestCA()

type ca struct {
	pool *x509.CertPool
	cert tls.Certificate
}

func newTestCA() *ca {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "halley test"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(24 * time.Hour), IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true, IsCA: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		panic(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		panic(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(c)
	return &ca{pool: pool, cert: tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: c}}
}

func readAll(t *testing.T, r io.Reader) []byte {
	t.Helper()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
