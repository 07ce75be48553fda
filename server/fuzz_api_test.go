package server_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/tidwall/gjson"

	"github.com/halley-bpm/halley/internal/testkit"
	"github.com/halley-bpm/halley/server"
	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
	"github.com/halley-bpm/halley/service/subscription"
)

// Fuzzing knobs: HALLEY_FUZZ_SEED (default fuzzSeed) and HALLEY_FUZZ_N (requests per store, default fuzzN).
const (
	fuzzSeed = 8
	fuzzN    = 1500
)

// bodylessWrites are the routes that change data and read nothing but their path: with a real id any request
// succeeds, so the fuzzer gives them only made-up ids. A new route of this kind makes the test fail (a 2xx on a
// write) until it is listed here.
var bodylessWrites = map[string]bool{
	"POST /api/v1/templates/:key/publish": true,
	"DELETE /api/v1/subscriptions/:id":    true,
	"POST /api/v1/cc/:id/read":            true,
	"DELETE /api/v1/users/:username":      true,
	"DELETE /api/v1/tokens/:id":           true,
}

// freeForm are the routes whose body is any JSON the caller likes (a callback's output, form values, a
// trigger's input): only bodies that are not JSON at all are sure to be refused there.
var freeForm = map[string]bool{
	"/api/v1/callback/:execution_id/:appinst_id": true,
	"/api/v1/forms/:key/submit":                  true,
	"/api/v1/trigger/sync/:module/:function":     true,
	"/api/v1/trigger/async/:module/:function":    true,
}

// notDigested are the tables a rejected request may legitimately write.
var notDigested = map[string]string{
	// The first response to a POST with an Idempotency-Key is stored whatever its status (4xx included), so
	// that a retry gets the same answer (API.md); the fuzzer sends such keys.
	"idempotency_keys": "stores 4xx responses of keyed POSTs by design",
}

// TestFuzzPublicAPI sends seeded random bad input to every route of the router (all methods, real and made-up
// ids in the path, as admin, as a plain user, anonymous and with a bad token) and checks that the server answers
// only 4xx in the error shape of API.md — never 5xx — and that no table changed.
func TestFuzzPublicAPI(t *testing.T) {
	seed, n := fuzzKnobs(t)
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		var router *gin.Engine
		e := newEnv(t, s, func(d *server.Deps) {
			withPlugins(t, nil)(d)
			d.Subscriptions = subscription.New(s, subscription.Options{Logger: testkit.Quiet(), Outbound: loopbackOutbound(t)})
			d.BodyLimit = 1 << 20 // the production default
			d.Logger = testkit.Quiet()
			twin, err := server.New(*d) // a twin of the env's server, for its route table
			if err != nil {
				t.Fatal(err)
			}
			router = twin.Handler().(*gin.Engine)
		})
		f := newFuzzer(t, e, seed)
		f.fixtures()
		before := digest(t, s)

		routes := router.Routes()
		slices.SortFunc(routes, func(a, b gin.RouteInfo) int { return strings.Compare(a.Method+a.Path, b.Method+b.Path) })
		counts := map[int]int{}
		for i := 0; i < n; i++ {
			// Every route at least once per pass, then at random.
			r := routes[i%len(routes)]
			if i >= len(routes) {
				r = routes[f.rng.Intn(len(routes))]
			}
			counts[f.send(r)/100]++
		}
		t.Logf("seed %d: %d requests over %d routes: %d 2xx (reads), %d 4xx", seed, n, len(routes), counts[2], counts[4])
		after := digest(t, s)
		for table, d := range before {
			if after[table] != d {
				t.Errorf("table %s changed: %s → %s", table, d, after[table])
			}
		}
		if len(after) != len(before) {
			t.Errorf("tables changed: %d → %d", len(before), len(after))
		}
	})
}

// fuzzKnobs reads HALLEY_FUZZ_SEED and HALLEY_FUZZ_N.
func fuzzKnobs(t *testing.T) (seed int64, n int) {
	t.Helper()
	seed, n = fuzzSeed, fuzzN
	if v := os.Getenv("HALLEY_FUZZ_SEED"); v != "" {
		var err error
		if seed, err = strconv.ParseInt(v, 10, 64); err != nil {
			t.Fatalf("HALLEY_FUZZ_SEED=%q: %v", v, err)
		}
	}
	if v := os.Getenv("HALLEY_FUZZ_N"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			t.Fatalf("HALLEY_FUZZ_N=%q: want a positive number", v)
		}
	}
	return seed, n
}

type fuzzer struct {
	t      *testing.T
	e      *env
	rng    *rand.Rand
	tokens []string            // admin, plain user, bad token, none
	ids    map[string][]string // real values by path parameter name
	prev   string              // the previous request, for failures that come from what went before on the connection
	// formInstance runs fuzz-form: its amount is read-only to everyone who may write into it.
	formInstance string
}

func newFuzzer(t *testing.T, e *env, seed int64) *fuzzer {
	return &fuzzer{t: t, e: e, rng: rand.New(rand.NewSource(seed)), ids: map[string][]string{}}
}

// fixtures creates one object of each kind that the routes address, so that real ids reach the handlers.
func (f *fuzzer) fixtures() {
	t, e := f.t, f.e
	bob := e.mkUser("bob")
	f.tokens = []string{e.admin, bob, "not-a-token", ""}
	mustStatus := func(r resp, want int) resp {
		t.Helper()
		if r.Status != want {
			t.Fatalf("fixture: %d, want %d: %s", r.Status, want, r.Body)
		}
		return r
	}
	mustStatus(e.do("POST", "/api/v1/departments", e.admin, M{"name": "eng", "leader": "bob"}, nil), 201)
	e.publish("fuzz", []any{start(M{"kind": "manual"}),
		M{"id": "wait", "type": "callback", "message": "go"},
		M{"id": "lead", "type": "approval", "approvers": M{"users": []string{"bob"}}, "cc": M{"users": []string{"bob"}}},
		M{"id": "end", "type": "end"}}, []any{edge("start", "lead"), edge("start", "wait"), edge("wait", "end"), edge("lead", "end")})
	e.publish("hook", []any{start(M{"kind": "sync-api", "module": "erp", "function": "order", "login_verification": "token", "header_token": "s3cret-token"}),
		M{"id": "end", "type": "end"}}, []any{edge("start", "end")})
	// A form start with a file field, and an approval whose form has read-only, editable and file fields: the
	// routes that check approve data and file values get real targets.
	fields := []any{M{"id": "a", "type": "money", "label": "Amount", "field": "amount", "readonly": true},
		M{"id": "b", "type": "input", "label": "Note", "field": "review.note"}, M{"id": "c", "type": "attachment", "label": "Files", "field": "review.files"}}
	e.publish("fuzz-form", []any{start(M{"kind": "form", "form": M{"kind": "components", "fields": fields}}),
		M{"id": "check", "type": "approval", "approvers": M{"users": []string{"bob"}}, "form": M{"kind": "components", "fields": fields}},
		M{"id": "end", "type": "end"}}, []any{edge("start", "check"), edge("check", "end")})
	inst := mustStatus(e.do("POST", "/api/v1/instances", bob, M{"template": "fuzz", "context": M{"n": 1}, "correlation_id": "c-1"}, nil), 201)
	id := inst.JSON["id"].(string)
	formInst := mustStatus(e.do("POST", "/api/v1/forms/fuzz-form/submit", bob, M{"amount": 10}, nil), 201)
	f.formInstance = formInst.JSON["id"].(string)
	mustStatus(e.upload("echo", "python", "", []byte("print('{}')"), e.admin), 201)
	sub := mustStatus(e.do("POST", "/api/v1/subscriptions", e.admin, M{"event": "task.created", "webhook_url": "http://127.0.0.1:9/hook"}, nil), 201)

	f.ids["id"] = []string{id, sub.JSON["id"].(string)}
	f.ids["execution_id"] = []string{id}
	for _, in := range []string{id, formInst.JSON["id"].(string)} {
		for _, tk := range e.instance(in).JSON["tasks"].([]any) {
			f.ids["id"] = append(f.ids["id"], tk.(M)["id"].(string))
		}
	}
	bms := mustStatus(e.do("GET", "/api/v1/instances/"+id+"/bookmarks", e.admin, nil, nil), 200)
	for _, b := range bms.JSON["items"].([]any) {
		f.ids["id"] = append(f.ids["id"], b.(M)["id"].(string))
		f.ids["appinst_id"] = append(f.ids["appinst_id"], b.(M)["node_instance_id"].(string))
	}
	f.ids["key"] = []string{"fuzz", "hook", "fuzz-form"}
	f.ids["n"] = []string{"1"}
	f.ids["username"] = []string{"admin", "bob"}
	f.ids["name"] = []string{"echo"}
	f.ids["module"] = []string{"erp"}
	f.ids["function"] = []string{"order"}
}

// send makes one random bad request to the route and checks the answer; it returns the status.
func (f *fuzzer) send(r gin.RouteInfo) int {
	t := f.t
	route := r.Method + " " + r.Path
	write := r.Method != http.MethodGet && r.Method != http.MethodHead
	path := f.path(r.Path, !bodylessWrites[route])
	if f.rng.Intn(3) == 0 {
		path += "?" + f.query()
	}
	method := r.Method
	if f.rng.Intn(20) == 0 {
		method = "PATCH" // no route has it: 404 or 405
	}
	body, ctype, chunked := f.body(route, write, freeForm[r.Path])
	req, err := http.NewRequest(method, f.e.url+path, bytes.NewReader(body))
	if err != nil {
		t.Fatalf("%s: building the request: %v", route, err)
	}
	if chunked {
		req.Body, req.ContentLength = io.NopCloser(bytes.NewReader(body)), -1
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	token := f.tokens[f.rng.Intn(len(f.tokens))]
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if f.rng.Intn(4) == 0 {
		req.Header.Set("Idempotency-Key", f.headerValue())
	}
	if f.rng.Intn(4) == 0 {
		req.Header.Set("X-Halley-Token", f.headerValue())
	}
	client := http.DefaultClient
	if method == http.MethodConnect {
		// Go's client treats a CONNECT connection as a tunnel: never reuse it, and send no body on it.
		client = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
		req.Body, req.ContentLength, body = nil, 0, nil
	}
	res, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	out, _ := io.ReadAll(res.Body)
	res.Body.Close()
	desc := fmt.Sprintf("%s %s (route %s, %d-byte %q body, token %d)", method, clip(path, 200), route, len(body), ctype, slices.Index(f.tokens, token))
	switch {
	case res.StatusCode >= 500:
		t.Errorf("%s: %d %s", desc, res.StatusCode, clip(string(out), 500))
	case res.StatusCode >= 400 && method == http.MethodHead: // no body, by definition
	case res.StatusCode >= 400:
		var eb server.ErrorBody
		if err := json.Unmarshal(out, &eb); err != nil || eb.Error.Code == "" || eb.Error.Message == "" || eb.Error.Details == nil {
			t.Errorf("%s: %d without the error shape: %s (previous: %s)", desc, res.StatusCode, clip(string(out), 500), f.prev)
		}
	case write && method == r.Method:
		t.Errorf("%s: %d — a write accepted random input: %s", desc, res.StatusCode, clip(string(out), 500))
	}
	f.prev = desc
	return res.StatusCode
}

// path fills the route's parameters with real ids (when real is allowed) or made-up values.
func (f *fuzzer) path(pattern string, real bool) string {
	parts := strings.Split(pattern, "/")
	for i, p := range parts {
		if !strings.HasPrefix(p, ":") && !strings.HasPrefix(p, "*") {
			continue
		}
		v := f.urlValue()
		if ids := f.ids[p[1:]]; real && len(ids) > 0 && f.rng.Intn(2) == 0 {
			v = ids[f.rng.Intn(len(ids))]
		}
		parts[i] = url.PathEscape(v)
	}
	return strings.Join(parts, "/")
}

var queryKeys = []string{"limit", "cursor", "status", "template", "initiator", "correlation_id", "assignee", "instance_id",
	"date", "wait", "token", "role", "version"}

func (f *fuzzer) query() string {
	q := url.Values{}
	for i := f.rng.Intn(4); i >= 0; i-- {
		k := queryKeys[f.rng.Intn(len(queryKeys))]
		switch f.rng.Intn(4) {
		case 0:
			q.Add(k, []string{"-1", "0", "201", "1e9", "99999999999999999999", "abc", "", "2026-13-45"}[f.rng.Intn(8)])
		default:
			q.Add(k, f.urlValue())
		}
	}
	if f.rng.Intn(5) == 0 {
		return q.Encode() + "&%zz=%&limit=%ff"
	}
	return q.Encode()
}

var contentTypes = []string{"application/json", "application/json; charset=latin1", "text/plain", "application/xml",
	"application/x-www-form-urlencoded", "multipart/form-data; boundary=fuzz", "multipart/form-data", "", "garbage/"}

// body returns a request body, its content type and whether to send it without a Content-Length. A write gets
// only bodies that no handler can accept: malformed JSON, JSON that is not an object, objects with a field no
// request type has, nesting past the decoder's depth limit, bodies over the limit, bad multipart uploads.
func (f *fuzzer) body(route string, write, freeForm bool) ([]byte, string, bool) {
	ctype := contentTypes[f.rng.Intn(len(contentTypes))]
	chunked := f.rng.Intn(5) == 0
	if !write && f.rng.Intn(3) == 0 {
		return nil, ctype, false
	}
	if route == "POST /api/v1/plugins" && f.rng.Intn(2) == 0 {
		b, ct := f.badUpload()
		return b, ct, chunked
	}
	kinds := 8
	if freeForm {
		kinds = 5 // not the valid JSON of kinds 1, 5, 6 and 7
	}
	var b []byte
	switch kind := f.rng.Intn(kinds); {
	case freeForm && kind == 1:
		b = []byte(`{"x":` + strings.Repeat("[", 10_001) + strings.Repeat("]", 10_001) + `}`)
	case kind == 0: // truncated: a strict prefix of an object is never valid JSON
		full := f.object(3)
		b = full[:1+f.rng.Intn(len(full)-1)]
	case kind == 1: // valid JSON, but not an object
		b, _ = json.Marshal([]any{f.value(3), []any{}, f.nasty(), 42.5, true}[f.rng.Intn(5)])
		if string(b) == "null" || b[0] == '{' { // value may give an object (e.g. {}), which a bodyless write accepts
			b = append(append([]byte("["), b...), ']')
		}
	case kind == 2: // nesting deeper than encoding/json's limit of 10,000
		depth := 10_001 + f.rng.Intn(1000)
		b = []byte(`{"data":` + strings.Repeat("[", depth) + strings.Repeat("]", depth) + `}`)
	case kind == 3: // over the 1 MiB body limit
		b = []byte(`{"comment":"` + strings.Repeat("A", 1<<20+f.rng.Intn(1<<16)) + `"}`)
	case kind == 4: // invalid UTF-8 and control characters outside strings
		b = append([]byte(`{"name":`), "\xff\xfe\x00\x1b"[f.rng.Intn(4)])
		b = append(b, f.object(2)...)
	default: // an object with random fields and one that no request type has
		b = f.object(4)
	}
	return b, ctype, chunked
}

// object is a JSON object with random fields (known names with values of random types) and always one unknown
// field, so that strict decoding refuses it.
func (f *fuzzer) object(depth int) []byte {
	var buf bytes.Buffer
	buf.WriteString(`{"x_fuzz_` + strconv.Itoa(f.rng.Int()) + `":`)
	buf.Write(f.rawValue(depth))
	for i := f.rng.Intn(5); i > 0; i-- {
		k, _ := json.Marshal(fieldNames[f.rng.Intn(len(fieldNames))])
		buf.WriteString(",")
		buf.Write(k)
		buf.WriteString(":")
		buf.Write(f.rawValue(depth))
	}
	buf.WriteString("}")
	return buf.Bytes()
}

var fieldNames = []string{"username", "password", "display_name", "roles", "department", "manager", "name", "leader", "parent",
	"key", "description", "definition", "template", "version", "context", "correlation_id", "title", "steps", "reason",
	"comment", "data", "to", "users", "position", "event", "plugin", "webhook_url", "secret", "ttl", "status", "nodes",
	"edges", "condition", "runtime", "timeout", "id", "token"}

// rawValue is a JSON value that may hold invalid UTF-8 inside its strings.
func (f *fuzzer) rawValue(depth int) []byte {
	if f.rng.Intn(4) == 0 {
		return []byte(`"` + strings.NewReplacer(`"`, `\"`, `\`, `\\`).Replace(f.nasty()) + `"`)
	}
	b, err := json.Marshal(f.value(depth))
	if err != nil {
		f.t.Fatal(err)
	}
	return b
}

func (f *fuzzer) value(depth int) any {
	n := 6
	if depth <= 0 {
		n = 4
	}
	switch f.rng.Intn(n) {
	case 0:
		return nil
	case 1:
		return f.rng.Intn(2) == 0
	case 2:
		return []float64{0, -1, 1e308, -1e-308, 4294967296, 3.5}[f.rng.Intn(6)]
	case 3:
		return f.nasty()
	case 4:
		a := make([]any, f.rng.Intn(4))
		for i := range a {
			a[i] = f.value(depth - 1)
		}
		return a
	default:
		m := map[string]any{}
		for i := f.rng.Intn(4); i > 0; i-- {
			m[f.pick(fieldNames, f.nasty())] = f.value(depth - 1)
		}
		return m
	}
}

func (f *fuzzer) pick(xs []string, other string) string {
	if f.rng.Intn(2) == 0 {
		return other
	}
	return xs[f.rng.Intn(len(xs))]
}

var nastyStrings = []string{
	"' OR '1'='1", "1; DROP TABLE users; --", `" OR ""="`, "admin'--", "%' UNION SELECT password_hash FROM users --",
	"1) OR (1=1", "\\'; SELECT SLEEP(5); --", "$where: '1 == 1'", `{"$gt": ""}`,
	"\x00", "a\x00b", "\x1b[31mred\r\n\t", "\u202eevil", "\ufeff", "\xff\xfe", "\xc3\x28", "\xed\xa0\x80", "\xf4\x90\x80\x80",
	"../../etc/passwd", "..%2f..%2f", "%s%n%x", "${jndi:ldap://x}", "{{7*7}}", "<script>alert(1)</script>",
	"", " ", "-1", "0", "NaN", "1e309", "😀", "Ω≈ç√", "名字", "null", "true", "[]", "{}",
}

// nasty returns a hostile string: SQL, control characters, invalid UTF-8, very long or random bytes.
func (f *fuzzer) nasty() string {
	switch f.rng.Intn(10) {
	case 0:
		return strings.Repeat(nastyStrings[f.rng.Intn(len(nastyStrings))]+"A", 1+f.rng.Intn(20_000))
	case 1:
		b := make([]byte, f.rng.Intn(64))
		f.rng.Read(b)
		return string(b)
	}
	return nastyStrings[f.rng.Intn(len(nastyStrings))]
}

// urlValue is a nasty string short enough for a URL: net/http itself refuses request heads over 1 MiB with a
// plain-text 431 before any handler runs, which is not Halley's to shape.
func (f *fuzzer) urlValue() string {
	return clip(f.nasty(), 32<<10)
}

// headerValue is a nasty string that net/http can still send as a header.
func (f *fuzzer) headerValue() string {
	v := strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r > 0x7e {
			return -1
		}
		return r
	}, f.nasty())
	if len(v) > 4000 {
		v = v[:4000]
	}
	return v + "k"
}

// badUpload is a multipart plugin upload that must be refused: its runtime is never python or binary, or its
// file is missing, or the multipart envelope is broken.
func (f *fuzzer) badUpload() ([]byte, string) {
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	_ = mw.WriteField("name", f.pick([]string{"echo", "new-plugin"}, f.nasty()))
	_ = mw.WriteField("runtime", f.pick([]string{"Python", "bin", "python3", "sh"}, "x"+f.nasty()))
	_ = mw.WriteField("timeout", f.pick([]string{"-1s", "1h", "abc", "0"}, f.nasty()))
	if f.rng.Intn(2) == 0 {
		fw, _ := mw.CreateFormFile("file", f.nasty())
		_, _ = fw.Write([]byte(f.nasty()))
	}
	mw.Close()
	raw := b.Bytes()
	if f.rng.Intn(3) == 0 {
		raw = raw[:f.rng.Intn(len(raw))]
	}
	return raw, mw.FormDataContentType()
}

// digest is every table's row count and a hash of its sorted rows, by table name.
func digest(t *testing.T, s *store.Store) map[string]string {
	t.Helper()
	tables, err := s.DB().Migrator().GetTables()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, table := range tables {
		if _, skip := notDigested[table]; skip || strings.HasPrefix(table, "sqlite_") {
			continue
		}
		rows, err := s.DB().Raw("SELECT * FROM " + table).Rows()
		if err != nil {
			t.Fatalf("digest %s: %v", table, err)
		}
		cols, _ := rows.Columns()
		var lines []string
		vals, ptrs := make([]any, len(cols)), make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		for rows.Next() {
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatalf("digest %s: %v", table, err)
			}
			var line strings.Builder
			for _, v := range vals {
				if b, ok := v.([]byte); ok {
					v = string(b)
				}
				fmt.Fprintf(&line, "%q|", fmt.Sprint(v))
			}
			lines = append(lines, line.String())
		}
		rows.Close()
		slices.Sort(lines)
		h := sha256.New()
		for _, l := range lines {
			h.Write([]byte(l + "\n"))
		}
		out[table] = fmt.Sprintf("%d rows %s", len(lines), hex.EncodeToString(h.Sum(nil))[:16])
	}
	return out
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// TestOverlongNamesAreRefused is a regression test for what the fuzzer found: a step name, an approver or a node
// id longer than its column failed the write on MySQL (500) instead of being refused as invalid (422), and so did
// a linear process's title longer than a template's name.
func TestOverlongNamesAreRefused(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		e := newEnv(t, s, nil)
		bob := e.mkUser("bob")
		long := strings.Repeat("x", 201)
		for _, steps := range []any{
			[]any{M{"name": long, "approvers": M{"users": []string{"bob"}}}},
			[]any{M{"name": "ok", "approvers": M{"users": []string{long}}}},
		} {
			assertError(t, e.do("POST", "/api/v1/instances/linear", bob, M{"title": "t", "steps": steps}, nil), 422, "")
		}
		def := M{"nodes": []any{start(M{"kind": "manual"}), M{"id": long, "type": "auto"}, M{"id": "end", "type": "end"}},
			"edges": []any{edge("start", long), edge(long, "end")}}
		if r := e.do("POST", "/api/v1/templates", e.admin, M{"key": "long", "name": "long", "definition": def}, nil); r.Status != 201 {
			t.Fatalf("save the draft: %d %s", r.Status, r.Body)
		}
		assertError(t, e.do("POST", "/api/v1/templates/long/publish", e.admin, nil, nil), 422, "")
		for _, table := range []string{"instances", "tasks", "template_versions"} {
			var n int64
			if err := s.DB().Table(table).Count(&n).Error; err != nil || n != 0 {
				t.Errorf("%s: %d rows (%v) after refused requests", table, n, err)
			}
		}
		// A linear process's title may be 500 characters, longer than a template's name: the hidden template
		// keeps the first 200 (it was a 500 on MySQL too).
		title := strings.Repeat("t", 500)
		r := e.do("POST", "/api/v1/instances/linear", bob, M{"title": title, "steps": []any{M{"name": "ok", "approvers": M{"users": []string{"bob"}}}}}, nil)
		if r.Status != 201 || r.JSON["title"] != title {
			t.Fatalf("linear with a 500-character title: %d %s", r.Status, clip(string(r.Body), 300))
		}
	})
}

// wellFormed builds, per write route, a body that decodes (only fields of the route's request type) but whose
// values are hostile: SQL, control characters, values around the columns' lengths, unknown references.
var wellFormed = map[string]func(f *fuzzer) M{
	"POST /api/v1/users": func(f *fuzzer) M {
		return M{"username": f.word(), "password": f.word(), "display_name": f.word(), "roles": f.words(), "department": f.word(), "manager": f.word()}
	},
	"POST /api/v1/tokens":      func(f *fuzzer) M { return M{"name": f.word(), "roles": f.words()} },
	"POST /api/v1/departments": func(f *fuzzer) M { return M{"name": f.word(), "leader": f.word(), "parent": f.word()} },
	"POST /api/v1/templates": func(f *fuzzer) M {
		return M{"key": f.word(), "name": f.word(), "description": f.word(), "definition": f.definition()}
	},
	"PUT /api/v1/templates/:key/draft":     func(f *fuzzer) M { return M{"definition": f.definition()} },
	"POST /api/v1/templates/validate":      func(f *fuzzer) M { return M{"definition": f.definition()} },
	"POST /api/v1/conditions/evaluate":     func(f *fuzzer) M { return M{"condition": f.value(4), "context": f.value(4)} },
	"POST /api/v1/auth/login":              func(f *fuzzer) M { return M{"username": f.word(), "password": f.word()} },
	"POST /api/v1/instances/:id/jump":      func(f *fuzzer) M { return M{"to": f.word(), "reason": f.word()} },
	"POST /api/v1/tasks/:id/transfer":      func(f *fuzzer) M { return M{"to": f.word(), "comment": f.word()} },
	"POST /api/v1/tasks/:id/return":        func(f *fuzzer) M { return M{"to": f.word(), "comment": f.word()} },
	"POST /api/v1/tasks/:id/approve":       func(f *fuzzer) M { return M{"comment": f.word(), "data": f.approveData()} },
	"POST /api/v1/tasks/:id/reject":        func(f *fuzzer) M { return M{"comment": f.word()} },
	"POST /api/v1/tasks/:id/reclaim":       func(f *fuzzer) M { return M{"comment": f.word()} },
	"POST /api/v1/instances/:id/withdraw":  func(f *fuzzer) M { return M{"reason": f.word()} },
	"POST /api/v1/instances/:id/terminate": func(f *fuzzer) M { return M{"reason": f.word()} },
	"POST /api/v1/bookmarks/:id/resume":    func(f *fuzzer) M { return M{"data": M{f.word(): f.value(3)}} },
	"POST /api/v1/tasks/:id/add-sign": func(f *fuzzer) M {
		return M{"users": f.words(), "position": f.pick([]string{"before", "after", "parallel"}, f.word()), "comment": f.word()}
	},
	"POST /api/v1/instances": func(f *fuzzer) M {
		return M{"template": f.pick([]string{"fuzz", "fuzz-form", "hook"}, f.word()), "version": f.rng.Intn(3), "context": M{f.word(): f.value(3)},
			"correlation_id": f.pick([]string{"c-1"}, f.word()), "title": f.word(), "override_trigger": f.rng.Intn(2) == 0,
			"initiator": f.pick([]string{"bob", "admin", "system:cron", "anonymous", ""}, f.word())}
	},
	"POST /api/v1/instances/linear": func(f *fuzzer) M {
		steps := []any{}
		for i := f.rng.Intn(3); i >= 0; i-- {
			steps = append(steps, M{"name": f.word(), "approvers": M{"users": f.words()}, "sign": f.pick([]string{"or", "all"}, f.word())})
		}
		return M{"title": f.word(), "steps": steps, "context": M{f.word(): f.value(2)}, "correlation_id": f.word()}
	},
	"POST /api/v1/messages": func(f *fuzzer) M {
		return M{"name": f.pick([]string{"go"}, f.word()), "correlation_id": f.pick([]string{"c-1"}, f.word()), "data": M{f.word(): f.value(2)},
			"ttl": f.pick([]string{"1h", "-1h", "0s", "99999999h"}, f.word())}
	},
	"POST /api/v1/subscriptions": func(f *fuzzer) M {
		return M{"event": f.pick([]string{"*", "task.created"}, f.word()), "template": f.word(), "plugin": f.word(),
			"webhook_url": f.pick([]string{"https://example.com/", "http://127.0.0.1:9/", "file:///etc/passwd"}, f.word()), "secret": f.word()}
	},
	"POST /api/v1/callback/:execution_id/:appinst_id": func(f *fuzzer) M { return M{f.word(): f.value(3)} },
	"POST /api/v1/forms/:key/submit": func(f *fuzzer) M {
		return M{f.pick([]string{"amount", "review"}, f.word()): f.value(3), "review": M{"files": f.fileValue(), "note": f.word()}}
	},
	"POST /api/v1/plugin-runs/:id/result": func(f *fuzzer) M {
		return M{"status": f.pick([]string{"succeeded", "failed"}, f.word()), "data": M{f.word(): f.value(2), "context": f.value(1),
			"decision": f.pick([]string{"approve", "reject", ""}, f.word())}}
	},
}

// approveData is approve data aimed at the forms of the fixtures: read-only fields, editable ones, file fields with
// hostile values, fields beside them, and nesting deeper than contexts may go.
func (f *fuzzer) approveData() any {
	switch f.rng.Intn(6) {
	case 0:
		return M{"amount": f.value(1)}
	case 1:
		return M{"review": M{"note": f.word(), "files": f.fileValue()}}
	case 2:
		return M{"review": M{f.word(): f.value(2)}}
	case 3:
		var v any = f.word()
		for i := 0; i < 65+f.rng.Intn(100); i++ {
			v = M{"x": v}
		}
		return M{"review": v}
	case 4:
		return f.value(3)
	}
	return M{f.word(): f.value(3)}
}

// fileValue is the value of a file field: lists of hostile files, links in disguise, ids, or anything.
func (f *fuzzer) fileValue() any {
	urls := []string{"javascript:alert(1)", "JaVaScRiPt:alert(1)", "data:text/html,<script>alert(1)</script>", "data:text/plain;base64,eA==",
		"data:;base64,!!", "https://evil.example/x", "vbscript:x", f.word()}
	switch f.rng.Intn(4) {
	case 0:
		return []any{M{"name": f.word(), "size": f.value(0), "type": f.pick([]string{"text/plain", "a/b"}, f.word()), "data_url": f.pick(urls, f.word())}}
	case 1:
		return []any{f.pick([]string{"01a2-att"}, f.word()), M{"id": f.word(), f.word(): f.value(1)}}
	case 2:
		return f.pick(urls, f.word())
	}
	return f.value(2)
}

// word is a hostile string that JSON can carry, often around the stores' column lengths (64 to 1,024).
func (f *fuzzer) word() string {
	switch f.rng.Intn(4) {
	case 0:
		return strings.Repeat(f.pick([]string{"x", "é", "名", "'"}, "a"), []int{63, 64, 65, 127, 128, 129, 199, 200, 201, 255, 256, 500, 1024, 1025, 70_000}[f.rng.Intn(15)])
	case 1:
		return f.pick([]string{"bob", "admin", "fuzz", "eng", "echo", "lead", "end", "start", "wait"}, "")
	}
	return clip(f.nasty(), 2000)
}

func (f *fuzzer) words() []string {
	w := make([]string, f.rng.Intn(3))
	for i := range w {
		w[i] = f.word()
	}
	return w
}

// definition is a template definition with hostile ids, names, types, approvers, triggers and conditions.
func (f *fuzzer) definition() M {
	types := []string{"start", "approval", "auto", "delay", "callback", "error", "end", "terminate"}
	var nodes, edges []any
	ids := []string{}
	for i := f.rng.Intn(5) + 1; i > 0; i-- {
		id := f.pick([]string{"start", "end", "a", "b"}, f.word())
		ids = append(ids, id)
		n := M{"id": id, "type": f.pick(types, f.word()), "name": f.word()}
		switch f.rng.Intn(5) {
		case 0:
			n["approvers"] = M{"users": f.words(), "roles": f.words(), "context": f.word()}
		case 1:
			n["trigger"] = M{"kind": f.pick([]string{"manual", "crontab", "sync-api", "form"}, f.word()), "expr": f.word(), "module": f.word(), "function": f.word()}
		case 2:
			n["interval"] = f.value(0)
		case 3:
			n["message"] = f.word()
		}
		nodes = append(nodes, n)
	}
	for i := f.rng.Intn(5); i > 0; i-- {
		e := M{"from": ids[f.rng.Intn(len(ids))], "to": ids[f.rng.Intn(len(ids))]}
		if f.rng.Intn(2) == 0 {
			e["condition"] = M{f.word(): f.value(2)}
		}
		edges = append(edges, e)
	}
	return M{"nodes": nodes, "edges": edges}
}

// TestFuzzWellFormedWrites sends bodies that decode but carry hostile values to the write routes, with real ids,
// as admin, as a plain user and anonymous. Some of these requests may succeed and change data (that is their
// job); what is checked is that none is a 5xx and that every error has the error shape. Seed and count as for
// TestFuzzPublicAPI.
func TestFuzzWellFormedWrites(t *testing.T) {
	seed, n := fuzzKnobs(t)
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		e := newEnv(t, s, func(d *server.Deps) {
			withPlugins(t, nil)(d)
			d.Subscriptions = subscription.New(s, subscription.Options{Logger: testkit.Quiet(), Outbound: loopbackOutbound(t)})
			d.BodyLimit = 1 << 20
			d.Logger = testkit.Quiet()
		})
		f := newFuzzer(t, e, seed)
		f.fixtures()
		routes := make([]string, 0, len(wellFormed))
		for r := range wellFormed {
			routes = append(routes, r)
		}
		slices.Sort(routes)
		counts := map[int]int{}
		for i := 0; i < n; i++ {
			route := routes[i%len(routes)]
			method, pattern, _ := strings.Cut(route, " ")
			req := f.e.do(method, f.path(pattern, true), f.tokens[f.rng.Intn(len(f.tokens))], wellFormed[route](f), nil)
			counts[req.Status/100]++
			switch {
			case req.Status >= 500:
				t.Errorf("%s: %d %s", route, req.Status, clip(string(req.Body), 500))
			case req.Status >= 400 && (req.code() == "" || req.JSON["error"].(M)["message"] == ""):
				t.Errorf("%s: %d without the error shape: %s", route, req.Status, clip(string(req.Body), 500))
			}
		}
		t.Logf("seed %d: %d well-formed writes over %d routes: %d 2xx, %d 4xx", seed, n, len(routes), counts[2], counts[4])
		// What the access rules promise held under all of it: the read-only amount is as submitted, and every
		// instance of the API-triggered template came through its trigger or an admin's recorded override.
		if got := gjson.GetBytes(e.instance(f.formInstance).Body, "context.amount").Raw; got != "10" {
			t.Errorf("the read-only amount of %s became %s", f.formInstance, got)
		}
		var rows []struct{ ID, Initiator string }
		if err := s.DB().Raw("SELECT id, initiator FROM instances WHERE tkey = 'hook'").Scan(&rows).Error; err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			started := gjson.GetBytes(e.do("GET", "/api/v1/instances/"+r.ID+"/history", e.admin, nil, nil).Body, "items.0")
			if r.Initiator != "api:erp/order" && started.Get("data.override_trigger").String() != "sync-api" {
				t.Errorf("instance %s of the sync-api template (initiator %s) skipped its trigger: %s", r.ID, r.Initiator, started.Raw)
			}
		}
	})
}
