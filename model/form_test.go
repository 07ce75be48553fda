package model_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/halley-bpm/halley/model"
)

func TestParseForm(t *testing.T) {
	for _, tc := range []struct {
		name, raw string
		bound     []string
	}{
		{"none", ``, nil},
		{"not an object", `[1]`, nil},
		{"html", `{"kind":"html","html":"<p>","fields":[{"id":"a","field":"x"}]}`, nil},
		{"no bound field", `{"fields":[{"name":"days","type":"number"}]}`, nil},
		{"bad paths dropped", `{"kind":"components","fields":[{"id":"a","field":"ok.path"},{"id":"b","field":"a.*"},{"id":"c","field":"x|y"},{"id":"d","field":""}]}`, []string{"ok.path"}},
		{"kind defaults to components", `{"fields":[{"id":"a","type":"input","field":"a"},{"id":"b","type":"description"}]}`, []string{"a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := model.ParseForm(json.RawMessage(tc.raw))
			if tc.bound == nil {
				if f != nil {
					t.Fatalf("ParseForm = %+v, want nil", f)
				}
				return
			}
			var got []string
			for _, x := range f.Fields {
				got = append(got, x.Field)
			}
			if strings.Join(got, ",") != strings.Join(tc.bound, ",") {
				t.Fatalf("bound %v, want %v", got, tc.bound)
			}
		})
	}
	f := model.ParseForm(json.RawMessage(`{"fields":[{"id":"a","field":"amount","readonly":true},{"id":"b","field":"review.note"},{"id":"c","type":"attachment","field":"review.files"}]}`))
	switch {
	case f.Editable("amount"), !f.Editable("review.note"), f.Editable("review"), f.Editable("other"):
		t.Fatal("Editable is wrong")
	case !f.EditableUnder("review"), f.EditableUnder("amount"), f.EditableUnder("rev"):
		t.Fatal("EditableUnder is wrong")
	case !f.Field("review.files").IsFile(), f.Field("review.note").IsFile():
		t.Fatal("IsFile is wrong")
	}
}

func TestCheckFileValue(t *testing.T) {
	ok := []string{
		`null`, `[]`,
		`[{"name":"a.pdf","size":3,"type":"application/pdf","data_url":"data:application/pdf;base64,cGRm"}]`,
		`[{"name":"a","data_url":"data:;base64,"}]`,
		`[{"name":"a","data_url":"data:text/plain;charset=utf-8;base64,eA=="}]`,
		`["01a2-att", {"id":"att_2","name":"b.png","content_type":"image/png","size":9,"sha256":"ab"}]`,
	}
	for _, v := range ok {
		if err := model.CheckFileValue("files", json.RawMessage(v)); err != nil {
			t.Errorf("%s: %v", v, err)
		}
	}
	bad := []string{
		`"javascript:alert(1)"`, `{"name":"x"}`, `[1]`, `["javascript:alert(1)"]`,
		`[{"name":"x","data_url":"javascript:alert(1)"}]`,
		`[{"name":"x","data_url":" javascript:alert(1)"}]`,
		`[{"name":"x","data_url":"data:text/html,<script>alert(1)</script>"}]`,
		`[{"name":"x","data_url":"data:text/html;base64,PHNjcmlwdD4=<"}]`,
		`[{"name":"x","data_url":"data:text/plain;base64,eA"}]`,
		`[{"name":"x","data_url":"https://evil.example/x"}]`,
		`[{"name":"x","url":"https://evil.example/x"}]`,
		`[{"name":"x"}]`,
		`[{"name":"x\u0000y","data_url":"data:;base64,"}]`,
		`[{"name":"x","type":"text/html\"><script>","data_url":"data:;base64,"}]`,
		`[{"name":"x","size":-1,"data_url":"data:;base64,"}]`,
		`[{"id":"../../etc/passwd"}]`,
		`[` + strings.Repeat(`"a",`, model.MaxFilesPerField) + `"a"]`,
	}
	for _, v := range bad {
		err := model.CheckFileValue("files", json.RawMessage(v))
		if e, ok := err.(*model.Error); !ok || e.Code != "invalid_file" || e.Details["field"] != "files" {
			t.Errorf("%s: %v, want invalid_file naming the field", v, err)
		}
	}
}

func TestDocumentDepth(t *testing.T) {
	for raw, want := range map[string]int{
		`1`: 0, `"[[["`: 0, `{}`: 1, `{"a":[1,{"b":"]]}"}]}`: 3, `[[[]],[]]`: 3, `{"a":"\"[{"}`: 1,
		strings.Repeat("[", 65) + strings.Repeat("]", 65): 65,
	} {
		if got := model.DocumentDepth([]byte(raw)); got != want {
			t.Errorf("DocumentDepth(%.40s) = %d, want %d", raw, got, want)
		}
	}
	if model.CheckDocumentDepth("context", []byte(strings.Repeat("[", 64)+strings.Repeat("]", 64))) != nil {
		t.Error("64 levels refused")
	}
	err := model.CheckDocumentDepth("context", []byte(strings.Repeat("[", 65)+strings.Repeat("]", 65)))
	if e, ok := err.(*model.Error); !ok || e.Code != "too_deep" || e.Kind != model.EINVALID {
		t.Errorf("65 levels: %v", err)
	}
}

// TestUsernameKey: names that read the same — letter case, full-width forms, ligatures — have one key; others not.
func TestUsernameKey(t *testing.T) {
	for _, c := range []struct{ a, b string }{{"admin", "ADMIN"}, {"admin", "Admin"}, {"admin", "ａｄｍｉｎ"}, {"office", "oﬃce"}, {"strasse", "STRAßE"}, {"kelvin", "\u212aelvin"}} {
		if model.UsernameKey(c.a) != model.UsernameKey(c.b) {
			t.Errorf("%q and %q have the keys %q and %q", c.a, c.b, model.UsernameKey(c.a), model.UsernameKey(c.b))
		}
	}
	if model.UsernameKey("admin") == model.UsernameKey("admln") || model.UsernameKey("bob") != "bob" {
		t.Error("distinct names share a key, or a plain name changed")
	}
}
