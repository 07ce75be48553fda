package notify

import (
	"sync"
	"testing"

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
