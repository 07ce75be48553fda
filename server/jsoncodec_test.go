package server

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	ginjson "github.com/gin-gonic/gin/codec/json"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/plugin"
	"github.com/halley-bpm/halley/service/engine"
	"github.com/halley-bpm/halley/service/template"
)

// TestResponseCodecMatchesEncodingJSON: every answer type of the API, each field filled (strings with HTML
// characters, U+2028, invalid UTF-8 and control characters; raw messages with spaces; times with nanoseconds and
// zones; maps of several keys), is written by the response codec byte for byte as encoding/json writes it.
func TestResponseCodecMatchesEncodingJSON(t *testing.T) {
	if _, ok := ginjson.API.(responseCodec); !ok {
		t.Fatalf("gin's JSON codec is %T, not Halley's", ginjson.API)
	}
	answers := []any{
		&engine.Decided{}, &engine.InstanceView{}, &model.Instance{}, &model.Task{}, &model.HistoryEvent{},
		&template.View{}, &model.User{}, &model.PluginRun{}, &model.Subscription{}, &model.NotificationDelivery{},
		&model.Delegation{}, &model.AuditEntry{}, &model.AttentionItem{}, &model.APIToken{}, &model.Channel{},
		&model.Department{}, &model.CCRecord{}, &model.Delivery{}, &plugin.SandboxReport{}, &NotificationList{},
		&List[*model.Task]{}, &List[*model.Instance]{}, &loginResponse{}, &meResponse{}, &tokenResponse{},
	}
	for _, v := range answers {
		fillAll(reflect.ValueOf(v).Elem(), 0)
		if b, _ := json.Marshal(v); len(b) < 40 {
			t.Errorf("%T was written as %s: not filled", v, b)
		}
		same(t, v)
	}
	same(t, gin.H{"items": []any{map[string]any{"z": 1, "a": "<b>&\u2028", "é": nil}}, "next_cursor": "", "n": 3.25})
	same(t, &engine.Decided{Task: nil, NextTasks: nil}) // an embedded nil pointer, a nil slice
	same(t, ErrorBody{Error: ErrorDetail{Code: "invalid_input", Message: "bad <input> \xff", Details: map[string]any{"field": "a"}}})

	// The one difference: exponents of two digits at least. The same number.
	std, _ := json.Marshal(1e-7)
	got, err := responseCodec{}.Marshal(1e-7)
	if err != nil || string(std) != "1e-7" || string(got) != "1e-07" {
		t.Fatalf("1e-7: encoding/json %s, the codec %s (%v)", std, got, err)
	}
	// Request bodies are read by encoding/json: its messages are what a 400 answer quotes.
	var x struct{ A int }
	errStd := json.Unmarshal([]byte(`{"A":"x"}`), &x)
	errGot := responseCodec{}.Unmarshal([]byte(`{"A":"x"}`), &x)
	if errStd == nil || errGot == nil || errStd.Error() != errGot.Error() {
		t.Fatalf("decoding errors differ: %v / %v", errStd, errGot)
	}
}

func same(t *testing.T, v any) {
	t.Helper()
	want, errStd := json.Marshal(v)
	got, err := responseCodec{}.Marshal(v)
	if (errStd == nil) != (err == nil) || string(want) != string(got) {
		t.Errorf("%T:\nencoding/json %s (%v)\nthe codec     %s (%v)", v, want, errStd, got, err)
	}
}

var (
	rawType  = reflect.TypeFor[json.RawMessage]()
	timeType = reflect.TypeFor[time.Time]()
)

// fillAll sets every settable field of v to a value that exercises the encoders.
func fillAll(v reflect.Value, depth int) {
	if depth > 5 {
		return
	}
	switch {
	case v.Type() == rawType:
		v.SetBytes([]byte(` { "k" : [1, "<b>", {"z": null}] } `))
		return
	case v.Type() == timeType:
		v.Set(reflect.ValueOf(time.Date(2026, 11, 30, 18, 4, 5, 123456789, time.FixedZone("CST", 8*3600))))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString("a <b> & \"c\" \u2028\u2029 \x01\xff é 审批 😀")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(-42)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(7)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(1234.5)
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		fillAll(p.Elem(), depth+1)
		v.Set(p)
	case reflect.Struct:
		for i := range v.NumField() {
			if f := v.Field(i); f.CanSet() {
				fillAll(f, depth+1)
			}
		}
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 2, 2)
		for i := range 2 {
			fillAll(s.Index(i), depth+1)
		}
		v.Set(s)
	case reflect.Array:
		for i := range v.Len() {
			fillAll(v.Index(i), depth+1)
		}
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		for _, k := range []string{"zeta", "alpha", "审批", "<k>"} {
			key := reflect.New(v.Type().Key()).Elem()
			if key.Kind() != reflect.String {
				fillAll(key, depth+1)
			} else {
				key.SetString(k)
			}
			val := reflect.New(v.Type().Elem()).Elem()
			fillAll(val, depth+1)
			m.SetMapIndex(key, val)
		}
		v.Set(m)
	case reflect.Interface:
		if v.NumMethod() == 0 {
			v.Set(reflect.ValueOf(map[string]any{"n": 1.5, "s": "<&>\u2028", "l": []any{true, nil}}))
		}
	}
}
