package notify

import (
	"fmt"
	"strings"
	"sync"
	"text/template"
	"time"
	"unicode/utf8"

	"github.com/halley-bpm/halley/model"
)

// Languages messages are written in; the first is the default of a tenant that chose none.
const (
	LangZH = "zh-CN"
	LangEN = "en"
)

// Data is what a message template reads. Every field is plain text; Waiting is already written out in the
// recipient's language ("2 小时 5 分钟", "2 h 5 min").
type Data struct {
	Event     string // the notified event (model.Notify*)
	Lang      string
	Recipient string // the recipient's display name
	Title     string // the instance's title in the recipient's language (else its plain title)
	Template  string // the template key
	// TemplateName is the template's name in the recipient's language (else its plain name, else its key).
	TemplateName string
	Step         string // the step (node) name in the recipient's language (else its plain name)
	Initiator    string // the initiator's display name
	Actor        string // who urged (task.urged)
	Comment      string // the urge's comment
	Waiting      string // how long the task has been waiting
	Link         string // the page to open
	InstanceID   string
	TaskID       string
	Count        int // digest: pending approvals
}

// builtin are the messages of each event in each language. Subjects are one line; bodies short enough for a
// phone's notification.
var builtin = map[string]map[string]model.MessageTemplate{
	model.NotifyTaskCreated: {
		LangZH: {Subject: "待审批：{{.Title}}", Body: "{{.Initiator}} 提交的「{{.Title}}」等待你审批（{{.Step}}）。\n{{.Link}}"},
		LangEN: {Subject: "Approval needed: {{.Title}}", Body: "{{.Initiator}}'s request \"{{.Title}}\" is waiting for your approval ({{.Step}}).\n{{.Link}}"},
	},
	model.NotifyTaskReturned: {
		LangZH: {Subject: "已退回：{{.Title}}", Body: "你提交的「{{.Title}}」被退回给你：修改后重新提交，或撤回。\n{{.Link}}"},
		LangEN: {Subject: "Returned to you: {{.Title}}", Body: "Your request \"{{.Title}}\" was returned to you: change and resubmit it, or withdraw it.\n{{.Link}}"},
	},
	model.NotifyTaskReminded: {
		LangZH: {Subject: "审批提醒：{{.Title}}", Body: "「{{.Title}}」（{{.Step}}）已等待你 {{.Waiting}}，请尽快处理。\n{{.Link}}"},
		LangEN: {Subject: "Reminder: {{.Title}}", Body: "\"{{.Title}}\" ({{.Step}}) has been waiting for you for {{.Waiting}}.\n{{.Link}}"},
	},
	model.NotifyTaskUrged: {
		LangZH: {Subject: "催办：{{.Title}}", Body: "{{.Actor}} 催办「{{.Title}}」（{{.Step}}，已等待 {{.Waiting}}）。{{if .Comment}}\n{{.Comment}}{{end}}\n{{.Link}}"},
		LangEN: {Subject: "Please decide: {{.Title}}", Body: "{{.Actor}} asks you to decide \"{{.Title}}\" ({{.Step}}, waiting for {{.Waiting}}).{{if .Comment}}\n{{.Comment}}{{end}}\n{{.Link}}"},
	},
	model.NotifyInstanceCompleted: {
		LangZH: {Subject: "已通过：{{.Title}}", Body: "你提交的「{{.Title}}」已审批通过。\n{{.Link}}"},
		LangEN: {Subject: "Approved: {{.Title}}", Body: "Your request \"{{.Title}}\" was approved.\n{{.Link}}"},
	},
	model.NotifyInstanceRejected: {
		LangZH: {Subject: "未通过：{{.Title}}", Body: "你提交的「{{.Title}}」被驳回。\n{{.Link}}"},
		LangEN: {Subject: "Rejected: {{.Title}}", Body: "Your request \"{{.Title}}\" was rejected.\n{{.Link}}"},
	},
	model.NotifyCCCreated: {
		LangZH: {Subject: "抄送：{{.Title}}", Body: "{{.Initiator}} 提交的「{{.Title}}」抄送给你（{{.Step}}）。\n{{.Link}}"},
		LangEN: {Subject: "For your information: {{.Title}}", Body: "{{.Initiator}}'s request \"{{.Title}}\" was copied to you ({{.Step}}).\n{{.Link}}"},
	},
	model.NotifyDigest: {
		LangZH: {Subject: "你有 {{.Count}} 条待审批", Body: "你有 {{.Count}} 条待审批，请及时处理。\n{{.Link}}"},
		LangEN: {Subject: "You have {{.Count}} pending approvals", Body: "You have {{.Count}} pending approvals.\n{{.Link}}"},
	},
}

// testMessage is the message of POST /channels/{name}/test.
var testMessage = map[string]model.MessageTemplate{
	LangZH: {Subject: "Halley 测试消息", Body: "这是来自 Halley 的测试消息：渠道「{{.Step}}」可以送达。\n{{.Link}}"},
	LangEN: {Subject: "Halley test message", Body: "This is a test message from Halley: channel \"{{.Step}}\" works.\n{{.Link}}"},
}

// Limits of an admin's template.
const (
	maxSubject = 200
	maxBody    = 4000
)

// compiled is a parsed template pair, and each as a plain template when it is one (plain.go).
type compiled struct {
	subject, body           *template.Template
	plainSubject, plainBody plain
}

// parsed keeps the templates compiled so far, by event and text: a notification is rendered in its step, and
// parsing both templates again for every one cost more than the rest of its rendering. A parsed template may be
// executed by many goroutines at once. An admin's change is new text, hence a new entry; the cache is emptied
// when it holds parsedMax, so that templates edited many times cannot grow it without end.
var parsed = struct {
	sync.Mutex
	m map[parsedKey]*compiled
}{m: map[parsedKey]*compiled{}}

type parsedKey struct{ name, subject, body string }

const parsedMax = 1024

// compileCached is compile for templates in use: parsed once per text. Templates that do not parse are not kept.
func compileCached(name string, t model.MessageTemplate) (*compiled, error) {
	k := parsedKey{name, t.Subject, t.Body}
	parsed.Lock()
	c := parsed.m[k]
	parsed.Unlock()
	if c != nil {
		return c, nil
	}
	c, err := compile(name, t)
	if err != nil {
		return nil, err
	}
	parsed.Lock()
	if len(parsed.m) >= parsedMax {
		clear(parsed.m)
	}
	parsed.m[k] = c
	parsed.Unlock()
	return c, nil
}

func compile(name string, t model.MessageTemplate) (*compiled, error) {
	s, err := template.New(name + ".subject").Option("missingkey=error").Parse(t.Subject)
	if err != nil {
		return nil, err
	}
	b, err := template.New(name + ".body").Option("missingkey=error").Parse(t.Body)
	if err != nil {
		return nil, err
	}
	return &compiled{subject: s, body: b, plainSubject: plainOf(s), plainBody: plainOf(b)}, nil
}

// sample is the data an admin's template is tried with before it is saved.
var sample = Data{Event: model.NotifyTaskCreated, Lang: LangEN, Recipient: "Bob", Title: "Leave request", Template: "leave", TemplateName: "Leave", Step: "Team lead",
	Initiator: "Alice", Actor: "Alice", Comment: "please", Waiting: "2 h", Link: "https://halley.example.com/tasks/i1-t1", InstanceID: "i1",
	TaskID: "i1-t1", Count: 3}

// checkTemplates parses and tries every override; EUNPROCESSABLE invalid_template naming the first at fault.
func checkTemplates(ts map[string]map[string]model.MessageTemplate) error {
	for ev, byLang := range ts {
		if !model.ValidNotifyEvent(ev) {
			return model.CodedError(model.EUNPROCESSABLE, "invalid_template", "templates: %q is not a notified event (%s)", ev, strings.Join(model.NotifyEvents, ", "))
		}
		for lang, t := range byLang {
			if lang != LangZH && lang != LangEN {
				return model.CodedError(model.EUNPROCESSABLE, "invalid_template", "templates.%s: language %q is not zh-CN or en", ev, lang)
			}
			if strings.TrimSpace(t.Subject) == "" || strings.TrimSpace(t.Body) == "" {
				return model.CodedError(model.EUNPROCESSABLE, "invalid_template", "templates.%s.%s: subject and body are both required", ev, lang)
			}
			if utf8.RuneCountInString(t.Subject) > maxSubject || utf8.RuneCountInString(t.Body) > maxBody {
				return model.CodedError(model.EUNPROCESSABLE, "invalid_template", "templates.%s.%s: the subject is at most %d characters and the body %d", ev, lang, maxSubject, maxBody)
			}
			c, err := compile(ev, t)
			if err == nil {
				d := sample
				d.Event, d.Lang = ev, lang
				_, _, err = c.render(d)
			}
			if err != nil {
				return model.CodedError(model.EUNPROCESSABLE, "invalid_template", "templates.%s.%s: %v", ev, lang, err).
					WithDetails(map[string]any{"event": ev, "language": lang, "fields": "Title Step Initiator Recipient Actor Comment Waiting Link InstanceID TaskID Template TemplateName Count Event Lang"})
			}
		}
	}
	return nil
}

func (c *compiled) render(d Data) (string, string, error) {
	subject, err := c.renderSubject(d)
	if err != nil {
		return "", "", err
	}
	var b strings.Builder
	if c.plainBody != nil {
		c.plainBody.write(&b, &d)
	} else if err := c.body.Execute(&b, d); err != nil {
		return "", "", err
	}
	return subject, strings.TrimSpace(b.String()), nil
}

func (c *compiled) renderSubject(d Data) (string, error) {
	var s strings.Builder
	if c.plainSubject != nil {
		c.plainSubject.write(&s, &d)
	} else if err := c.subject.Execute(&s, d); err != nil {
		return "", err
	}
	subject := strings.Join(strings.Fields(s.String()), " ") // one line: it becomes a mail header
	return truncate(subject, maxSubject), nil
}

// renderSubject is render's subject alone, for a notification no channel delivers: only its subject is kept (the
// in-app message), and a body costs as much again. A tenant's override is rendered whole, as render does, so that
// one whose body fails still gives way to the built-in subject.
func renderSubject(overrides map[string]map[string]model.MessageTemplate, d Data) (string, error) {
	if _, ok := overrides[d.Event][d.Lang]; ok || d.Event == "" {
		subject, _, err := render(overrides, d)
		return subject, err
	}
	c, err := compileCached(d.Event, builtin[d.Event][d.Lang])
	if err != nil {
		return "", err // the built-in templates are tested
	}
	return c.renderSubject(d)
}

// render writes the message of d.Event in d.Lang: the tenant's override when it has one that works, else the
// built-in one. A broken override is reported (the caller logs it) and the built-in message is sent instead:
// a template error never loses a notification.
func render(overrides map[string]map[string]model.MessageTemplate, d Data) (subject, body string, err error) {
	if t, ok := overrides[d.Event][d.Lang]; ok {
		c, cerr := compileCached(d.Event, t)
		if cerr == nil {
			if subject, body, cerr = c.render(d); cerr == nil {
				return subject, body, nil
			}
		}
		err = fmt.Errorf("the template of %s in %s does not work (%v); the built-in message was sent", d.Event, d.Lang, cerr)
	}
	t := builtin[d.Event][d.Lang]
	if d.Event == "" {
		t = testMessage[d.Lang]
	}
	c, cerr := compileCached(d.Event, t)
	if cerr != nil {
		return "", "", cerr // the built-in templates are tested
	}
	subject, body, cerr = c.render(d)
	if cerr != nil {
		return "", "", cerr
	}
	return subject, body, err
}

// waiting writes a duration the way a person would say it in lang, at minute precision.
func waiting(d time.Duration, lang string) string {
	m := int(d / time.Minute)
	days, hours, mins := m/(24*60), m/60%24, m%60
	zh := lang == LangZH
	switch {
	case m < 1 && zh:
		return "不到 1 分钟"
	case m < 1:
		return "less than a minute"
	case days > 0 && zh:
		return fmt.Sprintf("%d 天 %d 小时", days, hours)
	case days > 0:
		return fmt.Sprintf("%d d %d h", days, hours)
	case hours > 0 && zh:
		return fmt.Sprintf("%d 小时 %d 分钟", hours, mins)
	case hours > 0:
		return fmt.Sprintf("%d h %d min", hours, mins)
	case zh:
		return fmt.Sprintf("%d 分钟", mins)
	}
	return fmt.Sprintf("%d min", mins)
}

// truncate cuts s to at most n runes, marking the cut.
func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// truncateBytes cuts s to at most n bytes of UTF-8, marking the cut (IM robots limit their text in bytes).
func truncateBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
