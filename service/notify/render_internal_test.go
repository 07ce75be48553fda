package notify

import (
	"strings"
	"sync"
	"testing"
	"text/template"

	"github.com/halley-bpm/halley/model"
)

// TestTemplatesParsedOnce: a message's templates are parsed once per text — the same pair serves every later
// render, including many at once — an admin's changed text is parsed anew and used at once, a template that
// does not parse is never kept, and the cache is bounded.
func TestTemplatesParsedOnce(t *testing.T) {
	d := sample
	d.Event, d.Lang = model.NotifyTaskCreated, LangEN
	subject, body, err := render(nil, d)
	if err != nil || subject != "Approval needed: Leave request" || body == "" {
		t.Fatalf("built-in: %q %q %v", subject, body, err)
	}
	// Rendering a built-in message parses nothing: it allocates only its output and execution state (parsing the
	// pair again made it about 100).
	if n := testing.AllocsPerRun(50, func() { _, _, _ = render(nil, d) }); n > 30 {
		t.Errorf("a render makes %.0f allocations; the templates are parsed again", n)
	}

	own := model.MessageTemplate{Subject: "To do: {{.Title}}", Body: "{{.Step}} waits. {{.Link}}"}
	c1, err := compileCached(d.Event, own)
	if err != nil {
		t.Fatal(err)
	}
	if c2, _ := compileCached(d.Event, own); c2 != c1 {
		t.Error("the same text was parsed twice")
	}
	overrides := map[string]map[string]model.MessageTemplate{d.Event: {LangEN: own}}
	if s, _, err := render(overrides, d); err != nil || s != "To do: Leave request" {
		t.Errorf("override: %q %v", s, err)
	}
	own.Subject = "Changed: {{.Title}}"
	overrides[d.Event][LangEN] = own
	if s, _, err := render(overrides, d); err != nil || s != "Changed: Leave request" {
		t.Errorf("a changed override is not used at once: %q %v", s, err)
	}

	broken := model.MessageTemplate{Subject: "{{.Title", Body: "x"}
	if _, err := compileCached(d.Event, broken); err == nil {
		t.Fatal("a broken template parsed")
	}
	parsed.Lock()
	_, kept := parsed.m[parsedKey{d.Event, broken.Subject, broken.Body}]
	parsed.Unlock()
	if kept {
		t.Error("a template that does not parse was kept")
	}
	overrides[d.Event][LangEN] = broken
	if s, _, err := render(overrides, d); err == nil || s != "Approval needed: Leave request" {
		t.Errorf("a broken override: %q %v; want the built-in message and an error", s, err)
	}

	// Many renders at once share the parsed pairs (go test -race checks they may).
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			dd := d
			dd.Lang = []string{LangEN, LangZH}[i%2]
			for range 50 {
				if s, _, err := render(nil, dd); err != nil || s == "" {
					t.Errorf("render %s: %q %v", dd.Lang, s, err)
					return
				}
			}
		})
	}
	wg.Wait()

	for i := range parsedMax + 10 {
		if _, err := compileCached(d.Event, model.MessageTemplate{Subject: "s", Body: string(rune('a'+i%26)) + string(rune(i))}); err != nil {
			t.Fatal(err)
		}
	}
	parsed.Lock()
	n := len(parsed.m)
	parsed.Unlock()
	if n > parsedMax {
		t.Errorf("the cache holds %d parsed pairs, more than %d", n, parsedMax)
	}
}

// TestSubjectAloneIsTheSubject: a notification no channel delivers renders only its subject; it must be the very
// subject the whole render gives, for every event and language, for a working override and for one whose body
// fails (then the built-in subject, and an error to log).
func TestSubjectAloneIsTheSubject(t *testing.T) {
	for _, ev := range model.NotifyEvents {
		for _, lang := range []string{LangZH, LangEN} {
			d := sample
			d.Event, d.Lang = ev, lang
			want, _, werr := render(nil, d)
			got, gerr := renderSubject(nil, d)
			if got != want || gerr != nil || werr != nil || got == "" {
				t.Errorf("%s in %s: subject alone %q (%v), whole render %q (%v)", ev, lang, got, gerr, want, werr)
			}
		}
	}
	d := sample
	d.Event, d.Lang = model.NotifyTaskCreated, LangEN
	builtinSubject, _, _ := render(nil, d)
	for name, c := range map[string]struct {
		own     model.MessageTemplate
		want    string
		wantErr bool
	}{
		"working override":             {model.MessageTemplate{Subject: "To do: {{.Title}}", Body: "{{.Step}}"}, "To do: Leave request", false},
		"override whose body fails":    {model.MessageTemplate{Subject: "To do: {{.Title}}", Body: "{{.Nope}}"}, builtinSubject, true},
		"override that does not parse": {model.MessageTemplate{Subject: "{{.Title", Body: "x"}, builtinSubject, true},
	} {
		overrides := map[string]map[string]model.MessageTemplate{d.Event: {LangEN: c.own}}
		got, err := renderSubject(overrides, d)
		whole, _, _ := render(overrides, d)
		if got != c.want || got != whole || (err != nil) != c.wantErr {
			t.Errorf("%s: subject alone %q (%v), whole render %q; want %q", name, got, err, whole, c.want)
		}
	}
	if n := testing.AllocsPerRun(50, func() { _, _ = renderSubject(nil, d) }); n > 15 {
		t.Errorf("the subject alone makes %.0f allocations", n)
	}
}

// TestPlainTemplatesWriteWhatTextTemplateWrites: a template of text and {{.Field}} only is written by
// concatenation; it must write what text/template writes, for every built-in message and for odd values, and a
// template that is more than that must stay with text/template.
func TestPlainTemplatesWriteWhatTextTemplateWrites(t *testing.T) {
	odd := Data{Event: "e", Lang: "x", Recipient: "{{.Title}}", Title: "<b>&\"审批\"</b>\n\t ", Template: "%s %v", TemplateName: "",
		Step: "\x00\xff", Initiator: "😀", Actor: "a", Comment: "line\nline", Waiting: "2 h", Link: "https://h/x?a=1&b=2", InstanceID: "i", TaskID: "t", Count: -42}
	texts := []string{"{{.Count}} of {{.Title}}", "{{ .Title }}{{.Step}}{{.Recipient}}", "{{- .Title -}} , {{.Template}}", "only text", "{{.Waiting}}\n\n{{.Link}}"}
	for _, byLang := range builtin {
		for _, m := range byLang {
			texts = append(texts, m.Subject, m.Body)
		}
	}
	for _, m := range testMessage {
		texts = append(texts, m.Subject, m.Body)
	}
	plains := 0
	for _, text := range texts {
		tt, err := template.New("t").Option("missingkey=error").Parse(text)
		if err != nil {
			t.Fatalf("%q: %v", text, err)
		}
		p := plainOf(tt)
		if p == nil {
			continue
		}
		plains++
		for _, d := range []Data{sample, odd, {}} {
			var want, got strings.Builder
			if err := tt.Execute(&want, d); err != nil {
				t.Fatalf("%q: %v", text, err)
			}
			p.write(&got, &d)
			if got.String() != want.String() {
				t.Errorf("%q: plain wrote %q, text/template %q", text, got.String(), want.String())
			}
		}
	}
	if plains < len(texts)-4 {
		t.Errorf("only %d of %d texts are plain", plains, len(texts))
	}
	for _, text := range []string{"{{if .Comment}}x{{end}}", "{{.Title | printf \"%q\"}}", "{{.Nope}}", "{{$x := .Title}}{{$x}}", "{{.}}", "", "{{template \"a\"}}{{define \"a\"}}x{{end}}", "{{len .Title}}"} {
		tt, err := template.New("t").Option("missingkey=error").Parse(text)
		if err != nil {
			t.Fatalf("%q: %v", text, err)
		}
		if plainOf(tt) != nil {
			t.Errorf("%q was taken for a plain template", text)
		}
	}
	c, err := compile(model.NotifyTaskCreated, builtin[model.NotifyTaskCreated][LangZH])
	if err != nil || c.plainSubject == nil || c.plainBody == nil {
		t.Fatalf("the built-in task.created message is not plain: %v", err)
	}
}
