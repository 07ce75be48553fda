package server_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/pb33f/libopenapi/datamodel"

	"github.com/halley-bpm/halley/internal/testkit"
	"github.com/halley-bpm/halley/server"
	"github.com/halley-bpm/halley/service/notify"
	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
	"github.com/halley-bpm/halley/service/subscription"
)

// fullRouter is the route table of a server with every optional service (subscriptions, notifications), as
// halley serve builds it.
func fullRouter(t *testing.T) (*gin.Engine, *env) {
	t.Helper()
	s := storetest.Open(t, store.SQLite)
	var router *gin.Engine
	e := newEnv(t, s, func(d *server.Deps) {
		d.Subscriptions = subscription.New(s, subscription.Options{Logger: testkit.Quiet(), Outbound: loopbackOutbound(t)})
		n, err := notify.New(notify.Deps{Store: s, Links: notify.WebLinks("http://halley.test"), Outbound: loopbackOutbound(t), SecretKey: []byte("k")},
			notify.Options{Logger: testkit.Quiet()})
		if err != nil {
			t.Fatal(err)
		}
		d.Notify = n
		withAttachments(t, s, 1<<20)(d)
		d.Logger = testkit.Quiet()
		twin, err := server.New(*d)
		if err != nil {
			t.Fatal(err)
		}
		router = twin.Handler().(*gin.Engine)
	})
	return router, e
}

type openapiDoc struct {
	Paths map[string]map[string]json.RawMessage `json:"paths"`
}

var ginParam = regexp.MustCompile(`[:*]([A-Za-z0-9_]+)`)

// TestOpenAPICoversEveryRoute walks gin's route table: every route is in the OpenAPI document, and every
// operation of the document is a route.
func TestOpenAPICoversEveryRoute(t *testing.T) {
	router, _ := fullRouter(t)
	b, err := server.OpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	var doc openapiDoc
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	routes := map[string]bool{}
	var missing []string
	for _, r := range router.Routes() {
		if r.Method == http.MethodConnect { // gin's Any registers it; OpenAPI has no CONNECT operations
			continue
		}
		p := ginParam.ReplaceAllString(r.Path, "{$1}")
		routes[r.Method+" "+p] = true
		if _, ok := doc.Paths[p][strings.ToLower(r.Method)]; !ok {
			missing = append(missing, fmt.Sprintf("%s %s (registered in server/server.go routes())", r.Method, r.Path))
		}
	}
	sort.Strings(missing)
	for _, m := range missing {
		t.Errorf("route %s is not in the OpenAPI document: add an apiOp{Method, Path: %q, Tag, Sum, Auth, Body, Resp} to its area's "+
			"list in server/openapi_<area>.go (openapiInstances, openapiPeople, ...; a new area's list goes into apiAreas in server/openapi.go)",
			m, strings.Fields(m)[1])
	}
	var extra []string
	for p, ops := range doc.Paths {
		for m := range ops {
			if !routes[strings.ToUpper(m)+" "+p] {
				extra = append(extra, strings.ToUpper(m)+" "+p)
			}
		}
	}
	sort.Strings(extra)
	for _, x := range extra {
		t.Errorf("the OpenAPI document names %s, which is no route: fix or remove its apiOp in server/openapi_<area>.go", x)
	}
	if len(routes) < 80 {
		t.Fatalf("only %d routes walked", len(routes))
	}
}

// TestOpenAPIDocumentIsValid validates the document against the OpenAPI 3.1 specification's schema with
// libopenapi-validator, and real answers of the server against the document's response schemas.
func TestOpenAPIDocumentIsValid(t *testing.T) {
	b, err := server.OpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	// The definition schema it $refs (a reference relative to where the document is served) is fetched from a
	// running server, which serves it.
	_, e := fullRouter(t)
	base, _ := url.Parse(e.url)
	resolved := bytes.ReplaceAll(b, []byte(`"$ref": "/api/v1/schemas/`), []byte(`"$ref": "`+e.url+`/api/v1/schemas/`))
	doc, err := libopenapi.NewDocumentWithConfiguration(resolved, &datamodel.DocumentConfiguration{BaseURL: base, AllowRemoteReferences: true})
	if err != nil {
		t.Fatal(err)
	}
	if v := doc.GetVersion(); v != "3.1.0" {
		t.Fatalf("openapi %s, want 3.1.0", v)
	}
	v, errs := validator.NewValidator(doc)
	if len(errs) > 0 {
		t.Fatalf("validator: %v", errs)
	}
	if ok, verrs := v.ValidateDocument(); !ok {
		for _, e := range verrs {
			t.Errorf("%s: %s %v", e.Message, e.Reason, e.SchemaValidationErrors)
		}
		t.FailNow()
	}

	// The definition schema is $ref'd where a request carries a definition.
	if !bytes.Contains(b, []byte(`"$ref": "/api/v1/schemas/definition.json"`)) {
		t.Error("the document does not $ref the definition schema")
	}

	// Real answers match their documented schemas.
	for _, c := range []struct {
		method, path string
		body         any
		status       int
	}{
		{"GET", "/healthz", nil, 200},
		{"GET", "/api/v1/me", nil, 200},
		{"GET", "/api/v1/users", nil, 200},
		{"GET", "/api/v1/instances", nil, 200},
		{"GET", "/api/v1/tasks", nil, 200},
		{"GET", "/api/v1/templates", nil, 200},
		{"GET", "/api/v1/instances/nope", nil, 404},
		{"POST", "/api/v1/instances/linear", map[string]any{"title": "doc", "steps": []any{map[string]any{"name": "a", "approvers": map[string]any{"users": []string{"admin"}}}}}, 201},
		{"POST", "/api/v1/departments", map[string]any{"bad": true}, 0},
	} {
		var body io.Reader
		if c.body != nil {
			j, _ := json.Marshal(c.body)
			body = bytes.NewReader(j)
		}
		req, _ := http.NewRequest(c.method, e.url+c.path, body)
		req.Header.Set("Authorization", "Bearer "+e.admin)
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if c.status != 0 && res.StatusCode != c.status {
			t.Errorf("%s %s: %d %s", c.method, c.path, res.StatusCode, raw)
			continue
		}
		res.Body = io.NopCloser(bytes.NewReader(raw))
		// The validator matches the request against the document's paths, which are the server's own.
		req.URL.Scheme, req.URL.Host = "", ""
		if ok, verrs := v.ValidateHttpResponse(req, res); !ok {
			for _, ve := range verrs {
				t.Errorf("%s %s answered %d %s, against the document: %s (%s) %v", c.method, c.path, res.StatusCode, raw, ve.Message, ve.Reason,
					ve.SchemaValidationErrors)
			}
		}
	}
}

// GET /api/v1/openapi.json serves the document without credentials; /api/docs is an HTML page.
func TestOpenAPIRoutes(t *testing.T) {
	_, e := fullRouter(t)
	r := e.do("GET", "/api/v1/openapi.json", "", nil, nil)
	if r.Status != 200 || r.JSON["openapi"] != "3.1.0" || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("openapi.json: %d %s", r.Status, r.Body)
	}
	r = e.do("GET", "/api/docs", "", nil, nil)
	if r.Status != 200 || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/html") || !bytes.Contains(r.Body, []byte("/api/v1/openapi.json")) {
		t.Fatalf("api docs: %d %s %s", r.Status, r.Header.Get("Content-Type"), r.Body)
	}
}
