package server

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/halley-bpm/halley/model"
)

// The response codec must write what encoding/json writes, byte for byte: clients (and the UI) were built against
// those bytes, and ETags or signatures over a body would change with them. One difference is known and allowed: a
// float below 1e-6 is written 1e-07 where encoding/json writes 1e-7 (the same number to every JSON reader).
func TestResponseJSONWritesWhatEncodingJSONWrites(t *testing.T) {
	at := time.Date(2026, 11, 30, 1, 2, 3, 456789012, time.FixedZone("CST", 8*3600))
	end := at.Add(time.Hour)
	var anything any
	if err := json.Unmarshal([]byte(`{"z":1,"a":[1.5,1e21,1e-7,0.1,-0,123456789012345678,true,null,"x"],"m":{"b":{},"a":[]},"s":"<script>&'\"\u2028\u2029 审批 😀"}`), &anything); err != nil {
		t.Fatal(err)
	}
	values := map[string]any{
		"instance": &model.Instance{ID: "i1", Template: "leave", Version: 2, Title: "请假 <b>&</b>", TitleI18n: map[string]string{"zh-CN": "请假", "en": "Leave"},
			Status: "running", Initiator: "alice", Context: json.RawMessage(" { \"days\" : 3 ,\n \"why\": \"<x>\" } "), CreatedAt: at, UpdatedAt: at, EndedAt: &end},
		"instance without ends": &model.Instance{ID: "i2", Context: json.RawMessage(`{}`)},
		"task":                  &model.Task{ID: "t1", InstanceID: "i1", NodeID: "n1", NodeName: "经理", Assignee: "bob", Status: "pending", Kind: "approval", CreatedAt: at},
		"tasks page":            gin.H{"items": []*model.Task{{ID: "t1"}, {ID: "t2", DecidedAt: &end}}, "next": "", "total": 2},
		"nil slice and map":     gin.H{"items": []string(nil), "labels": map[string]string(nil), "empty": []int{}},
		"error shape":           gin.H{"error": gin.H{"code": "EINVALID", "message": "bad \"input\" <here>", "details": []string{"a", "b"}}},
		"anything":              anything,
		"floats":                []float64{0, 1, -1.25, 1e20, 1e21, 1e-6, 1e-7, math.MaxFloat64, math.SmallestNonzeroFloat64, float64(float32(0.1))},
		"float32":               []float32{0.1, 1e21, 3.4e38},
		"invalid utf-8":         "a\xffb\xc3(c",
		"control characters":    "tab\tnl\nnul\x00del\x7f",
		"integers":              []any{int64(math.MinInt64), uint64(math.MaxUint64), int8(-3), json.Number("12.50")},
		"bytes":                 []byte("binary\x00data"),
		"map of int keys":       map[int]string{10: "ten", 2: "two", -1: "minus"},
		"pointers":              struct{ A, B *int }{B: new(int)},
		"omitempty and -": struct {
			A string `json:"a,omitempty"`
			B int    `json:"b,omitempty"`
			C string `json:"-"`
			D string `json:"d,string"`
			E int    `json:"e,string"`
		}{C: "hidden", D: "quoted", E: 5},
		"invalid raw message": gin.H{"context": json.RawMessage(`{"a":`)},
		"durations":           []model.Duration{model.Duration(90 * time.Second)},
	}
	// Every template shipped with Halley, through the definition's own MarshalJSON.
	files, _ := filepath.Glob("../templates/*.json")
	if len(files) == 0 {
		t.Fatal("no templates/*.json to encode")
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var doc map[string]json.RawMessage
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		var def model.Definition
		if err := json.Unmarshal(doc["definition"], &def); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		values["template "+filepath.Base(f)] = gin.H{"definition": def, "raw": json.RawMessage(b)}
	}
	for name, v := range values {
		want, werr := json.Marshal(v)
		got, gerr := responseJSON{}.Marshal(v)
		if (werr == nil) != (gerr == nil) {
			t.Errorf("%s: encoding/json error %v, response codec error %v", name, werr, gerr)
			continue
		}
		if !bytes.Equal(bytes.ReplaceAll(got, []byte("e-0"), []byte("e-")), want) {
			t.Errorf("%s: the response codec wrote\n%s\nencoding/json writes\n%s", name, got, want)
		}
	}
}
