package notify_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/emersion/go-message/mail"
	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
)

// mailServer is a real SMTP server (go-smtp) on 127.0.0.1 that requires TLS before AUTH PLAIN and keeps the
// messages it accepted, with whether each came over TLS and who authenticated.
type mailServer struct {
	mu       sync.Mutex
	messages []received
	port     int
}

type received struct {
	from, to string
	tls      bool
	user     string
	data     []byte
}

func (m *mailServer) got() []received {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]received(nil), m.messages...)
}

const smtpUser, smtpPassword = "halley@example.com", "smtp-pass-9f2e7"

// startMailServer starts the server; implicitTLS serves TLS from the first byte (port 465 style), else STARTTLS.
func startMailServer(t *testing.T, implicitTLS bool) *mailServer {
	m := &mailServer{}
	srv := smtp.NewServer(smtp.BackendFunc(func(c *smtp.Conn) (smtp.Session, error) {
		_, isTLS := c.TLSConnectionState()
		return &session{srv: m, tls: isTLS, conn: c}, nil
	}))
	srv.Domain = "localhost"
	srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{testCA.cert}, MinVersion: tls.VersionTLS12}
	srv.AllowInsecureAuth = false // AUTH only after STARTTLS (or over implicit TLS)
	var ln net.Listener
	var err error
	if implicitTLS {
		ln, err = tls.Listen("tcp", "127.0.0.1:0", srv.TLSConfig)
	} else {
		ln, err = net.Listen("tcp", "127.0.0.1:0")
	}
	if err != nil {
		t.Fatal(err)
	}
	m.port = ln.Addr().(*net.TCPAddr).Port
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return m
}

type session struct {
	srv  *mailServer
	conn *smtp.Conn
	tls  bool
	user string
	cur  received
}

func (s *session) AuthMechanisms() []string { return []string{sasl.Plain} }

func (s *session) Auth(mech string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(identity, username, password string) error {
		if username != smtpUser || password != smtpPassword {
			return errors.New("invalid credentials")
		}
		s.user = username
		return nil
	}), nil
}

func (s *session) Mail(from string, _ *smtp.MailOptions) error {
	if s.user == "" {
		return smtp.ErrAuthRequired
	}
	s.cur = received{from: from, user: s.user}
	return nil
}

func (s *session) Rcpt(to string, _ *smtp.RcptOptions) error { s.cur.to = to; return nil }

func (s *session) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	_, s.cur.tls = s.conn.TLSConnectionState()
	s.cur.data = b
	s.srv.mu.Lock()
	s.srv.messages = append(s.srv.messages, s.cur)
	s.srv.mu.Unlock()
	return nil
}

func (s *session) Reset()        {}
func (s *session) Logout() error { return nil }

// parsed is a mail as a well-kept parser (go-message) reads it.
type parsed struct {
	subject, lang, to, body string
}

func parseMail(t *testing.T, data []byte) parsed {
	t.Helper()
	r, err := mail.CreateReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	subject, err := r.Header.Subject()
	if err != nil {
		t.Fatal(err)
	}
	to, err := r.Header.AddressList("To")
	if err != nil || len(to) != 1 {
		t.Fatalf("To: %v %v", to, err)
	}
	p, err := r.NextPart()
	if err != nil {
		t.Fatal(err)
	}
	body := readAll(t, p.Body)
	return parsed{subject: subject, lang: r.Header.Get("Content-Language"), to: to[0].Address, body: string(body)}
}

func TestSMTPChannelSendsMailInTheRecipientsLanguage(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		f := newFixture(t, s, "127.0.0.1")
		f.user(&model.User{Username: "bob", DisplayName: "王小明", Email: "bob@example.com"}) // no language: the tenant's (zh-CN)
		f.user(&model.User{Username: "carol", DisplayName: "Carol", Email: "carol@example.com", Language: "en"})
		f.user(&model.User{Username: "dave", DisplayName: "Dave"}) // no email: skipped, and the log says so
		f.user(&model.User{Username: "alice", DisplayName: "Alice"})
		starttls, implicit := startMailServer(t, false), startMailServer(t, true)
		f.channel("mail", model.ChannelSMTP, map[string]any{"host": "127.0.0.1", "port": starttls.port, "username": smtpUser, "password": smtpPassword,
			"from": "Halley <halley@example.com>", "tls": "starttls"})
		f.channel("mail-465", model.ChannelSMTP, map[string]any{"host": "127.0.0.1", "port": implicit.port, "username": smtpUser, "password": smtpPassword,
			"from": "halley@example.com", "tls": "tls"})
		f.settings(&model.NotificationSettings{Events: map[string][]string{model.NotifyTaskCreated: {"mail"}, model.NotifyTaskReminded: {"mail-465"}}})

		bob, carol, dave := f.taskCreated("bob", model.TaskKindApproval, 0), f.taskCreated("carol", model.TaskKindApproval, 0), f.taskCreated("dave", model.TaskKindApproval, 0)
		f.event(bob, carol, dave)
		remind := f.taskCreated("carol", model.TaskKindApproval, 125*60e9) // waiting 2 h 5 min
		remind["event"] = "task.reminder"
		f.event(remind)
		f.deliver()

		got := starttls.got()
		if len(got) != 2 {
			t.Fatalf("the STARTTLS server got %d messages, want 2", len(got))
		}
		byTo := map[string]parsed{}
		for _, m := range got {
			if !m.tls || m.user != smtpUser || m.from != "halley@example.com" {
				t.Errorf("message not sent over TLS with AUTH PLAIN: %+v", m)
			}
			p := parseMail(t, m.data)
			if p.to != m.to {
				t.Errorf("To header %q, envelope %q", p.to, m.to)
			}
			byTo[p.to] = p
		}
		bobTask := bob["task"].(map[string]any)["id"].(string)
		zh := byTo["bob@example.com"]
		if zh.subject != "待审批：Leave i1" || zh.lang != "zh-CN" || !strings.Contains(zh.body, "Alice 提交的「Leave i1」等待你审批（Team lead）") ||
			!strings.Contains(zh.body, "https://halley.example.com/tasks/"+bobTask) {
			t.Errorf("bob's mail: %+v", zh)
		}
		if !strings.Contains(string(got[0].data)+string(got[1].data), "Subject: =?utf-8?") {
			t.Errorf("the Chinese subject is not RFC 2047 encoded:\n%s", got[0].data)
		}
		en := byTo["carol@example.com"]
		if en.subject != "Approval needed: Leave i1" || en.lang != "en" || !strings.Contains(en.body, "https://halley.example.com/tasks/t-1-carol") {
			t.Errorf("carol's mail: %+v", en)
		}
		rem := implicit.got()
		if len(rem) != 1 || !rem[0].tls {
			t.Fatalf("the implicit-TLS server got %d messages", len(rem))
		}
		if p := parseMail(t, rem[0].data); p.subject != "Reminder: Leave i2" || !strings.Contains(p.body, "waiting for you for 2 h 5 min") {
			t.Errorf("the reminder: %+v", p)
		}
		skipped := f.deliveries(model.DeliverySkipped)
		if len(skipped) != 1 || skipped[0].Recipient != "dave" || skipped[0].LastError != "dave has no email address" {
			t.Errorf("skipped: %+v", skipped)
		}
		if n := len(f.deliveries(model.DeliveryDelivered)); n != 3 {
			t.Errorf("%d delivered, want 3", n)
		}
		if strings.Contains(f.logs.String(), smtpPassword) {
			t.Error("a log line shows the SMTP password")
		}
	})
}

func TestSMTPWrongPasswordIsAnError(t *testing.T) {
	f := newFixture(t, storetest.Open(t, store.SQLite), "127.0.0.1")
	srv := startMailServer(t, false)
	f.channel("mail", model.ChannelSMTP, map[string]any{"host": "127.0.0.1", "port": srv.port, "username": smtpUser, "password": "wrong-password-1",
		"from": "halley@example.com"})
	err := f.svc.TestChannel(context.Background(), admin, "mail", "ops@example.com")
	if !model.IsKind(err, model.EBADGATEWAY) || !strings.Contains(err.Error(), "authentication failed") || strings.Contains(err.Error(), "wrong-password-1") {
		t.Fatalf("test with a wrong password: %v", err)
	}
	f.channel("mail-ok", model.ChannelSMTP, map[string]any{"host": "127.0.0.1", "port": srv.port, "username": smtpUser, "password": smtpPassword,
		"from": "halley@example.com"})
	if err := f.svc.TestChannel(context.Background(), admin, "mail-ok", "ops@example.com"); err != nil {
		t.Fatal(err)
	}
	if got := srv.got(); len(got) != 1 || got[0].to != "ops@example.com" || parseMail(t, got[0].data).subject != "Halley 测试消息" {
		t.Fatalf("test message: %+v", got)
	}
}
