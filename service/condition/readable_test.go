package condition_test

import (
	"testing"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/condition"
)

// readableFields are the labels a leave form gives its paths, in both languages.
var readableFields = map[string]map[string]condition.Field{
	model.LangZhCN: {
		"days":                 {Label: "天数"},
		"lead_review.escalate": {Label: "领导审批.上报"},
		"kind":                 {Label: "类型", Options: map[string]string{"annual": "年假", "sick": "病假"}},
		"tags":                 {Label: "标签", Options: map[string]string{"urgent": "紧急"}},
		"lines.amount":         {Label: "金额"},
	},
	model.LangEN: {
		"days":                 {Label: "Days"},
		"lead_review.escalate": {Label: "Lead escalates"},
		"kind":                 {Label: "Kind", Options: map[string]string{"annual": "Annual leave", "sick": "Sick leave"}},
		"tags":                 {Label: "Tags", Options: map[string]string{"urgent": "Urgent"}},
		"lines.amount":         {Label: "Amount"},
	},
}

func TestReadable(t *testing.T) {
	cases := []struct {
		cond, zh, en string
	}{
		// Every comparison, with the field's label.
		{`{"days": 3}`, "天数 = 3", "Days = 3"},
		{`{"days": {"$eq": 3}}`, "天数 = 3", "Days = 3"},
		{`{"days": {"$ne": 3}}`, "天数 ≠ 3", "Days ≠ 3"},
		{`{"days": {"$gt": 3}}`, "天数 > 3", "Days > 3"},
		{`{"days": {"$gte": 3}}`, "天数 ≥ 3", "Days ≥ 3"},
		{`{"days": {"$lt": 3}}`, "天数 < 3", "Days < 3"},
		{`{"days": {"$lte": 3.5}}`, "天数 ≤ 3.5", "Days ≤ 3.5"},
		{`{"days": {"$gt": 1, "$lt": 5}}`, "天数 > 1 且 天数 < 5", "Days > 1 and Days < 5"},
		// Booleans in words, options by their labels, lists item by item.
		{`{"lead_review.escalate": true}`, "领导审批.上报 = 是", "Lead escalates = yes"},
		{`{"lead_review.escalate": false}`, "领导审批.上报 = 否", "Lead escalates = no"},
		{`{"kind": "sick"}`, "类型 = 病假", "Kind = Sick leave"},
		{`{"kind": "other"}`, "类型 = other", "Kind = other"},
		{`{"kind": {"$in": ["annual", "sick", "x"]}}`, "类型 属于 [年假,病假,x]", "Kind in [Annual leave,Sick leave,x]"},
		{`{"kind": {"$nin": ["annual"]}}`, "类型 不属于 [年假]", "Kind not in [Annual leave]"},
		{`{"kind": {"$in": [{"$regex": "^a"}]}}`, "类型 属于 [/^a/]", "Kind in [/^a/]"},
		{`{"tags": ["urgent", "x"]}`, "标签 = [紧急,x]", "Tags = [Urgent,x]"},
		// Presence, patterns, types, sizes, $all, $elemMatch, $not.
		{`{"days": {"$exists": true}}`, "天数 已填写", "Days is filled in"},
		{`{"days": {"$exists": false}}`, "天数 未填写", "Days is empty"},
		{`{"kind": {"$regex": "^an", "$options": "i"}}`, "类型 匹配 /^an/i", "Kind matches /^an/i"},
		{`{"days": {"$type": "number"}}`, "天数 的类型为 number", "Days is of type number"},
		{`{"days": {"$type": ["int", "string"]}}`, "天数 的类型为 [int,string]", "Days is of type [int,string]"},
		{`{"tags": {"$size": 2}}`, "标签 的数量 = 2", "number of Tags = 2"},
		{`{"tags": {"$all": ["urgent", "x"]}}`, "标签 包含全部 [紧急,x]", "Tags has all of [Urgent,x]"},
		{`{"tags": {"$elemMatch": {"$in": ["urgent"]}}}`, "标签 中有一项：属于 [紧急]", "an item of Tags: in [Urgent]"},
		{`{"lines": {"$elemMatch": {"amount": {"$gt": 100}, "note": {"$exists": true}}}}`, "lines 中有一项：金额 > 100 且 note 已填写", "an item of lines: Amount > 100 and note is filled in"},
		{`{"days": {"$not": {"$gt": 3}}}`, "非（天数 > 3）", "not (Days > 3)"},
		// and / or / nor, nested with brackets.
		{`{"$or": [{"days": {"$gt": 3}}, {"lead_review.escalate": true}]}`, "天数 > 3 或 领导审批.上报 = 是", "Days > 3 or Lead escalates = yes"},
		{`{"$and": [{"days": {"$gt": 3}}, {"$or": [{"kind": "sick"}, {"lead_review.escalate": true}]}]}`,
			"天数 > 3 且 (类型 = 病假 或 领导审批.上报 = 是)", "Days > 3 and (Kind = Sick leave or Lead escalates = yes)"},
		{`{"$nor": [{"days": 1}, {"days": 2}]}`, "非（天数 = 1 或 天数 = 2）", "not (Days = 1 or Days = 2)"},
		// A path without a label reads as the path; null and strings as String() writes them.
		{`{"amount": {"$gte": 1000}, "note": null, "who": ""}`, "amount ≥ 1000 且 note = null 且 who = \"\"", "amount ≥ 1000 and note = null and who = \"\""},
	}
	for _, tc := range cases {
		c, err := condition.Compile([]byte(tc.cond))
		if err != nil {
			t.Fatalf("Compile(%s): %v", tc.cond, err)
		}
		for lang, want := range map[string]string{model.LangZhCN: tc.zh, model.LangEN: tc.en} {
			if got := c.Readable(lang, readableFields[lang]); got != want {
				t.Errorf("Readable(%s, %s) = %q, want %q", lang, tc.cond, got, want)
			}
		}
	}
}

func TestReadableFallbacks(t *testing.T) {
	c, err := condition.Compile([]byte(`{"days": {"$gt": 3}, "ok": true}`))
	if err != nil {
		t.Fatal(err)
	}
	// No labels: the paths; an unknown language: English words.
	if got := c.Readable(model.LangZhCN, nil); got != "days > 3 且 ok = 是" {
		t.Errorf("no labels: %q", got)
	}
	if got := c.Readable("fr", nil); got != "days > 3 and ok = yes" {
		t.Errorf("unknown language: %q", got)
	}
	// A field with an empty label reads as its path.
	if got := c.Readable(model.LangEN, map[string]condition.Field{"days": {}}); got != "days > 3 and ok = yes" {
		t.Errorf("empty label: %q", got)
	}
	// Always-true conditions say nothing.
	var nilCond *condition.Condition
	empty, _ := condition.Compile([]byte(`{}`))
	if nilCond.Readable(model.LangEN, nil) != "" || empty.Readable(model.LangZhCN, nil) != "" {
		t.Error("an always-true condition must read empty")
	}
	// Long values and lists are cut as String() cuts them.
	long, _ := condition.Compile([]byte(`{"k": {"$in": [1,2,3,4,5,6,7]}, "s": "abcdefghijklmnopqrstuvwxyz0123456789"}`))
	if got := long.Readable(model.LangEN, nil); got != "k in [1,2,3,4,5,…] and s = abcdefghijklmnopqrstuvwxyz01234…" {
		t.Errorf("cut: %q", got)
	}
}
