package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/gin-gonic/gin"
	"github.com/invopop/jsonschema"
	orderedmap "github.com/pb33f/ordered-map/v2"

	"github.com/halley-bpm/halley/model"
)

// The OpenAPI document (GET /api/v1/openapi.json) is built from apiOps: one per route, listed by area in
// openapi_<area>.go beside the handlers' files. Request and response schemas are reflected from the Go types the
// handlers bind and answer, so they follow the code. TestOpenAPICoversEveryRoute walks gin's route table and fails
// when a route has no apiOp, or an apiOp no route.
//
// To document a new route: add an apiOp to the area's list (openapiInstances, openapiPeople, ...), with the gin
// path exactly as registered in routes().

// apiOp is one operation of the document.
type apiOp struct {
	Method string // an HTTP method, or "ANY" for a gin Any route (documented for every OpenAPI method)
	Path   string // the gin path, /api/v1 included: /api/v1/instances/:id
	Tag    string
	Sum    string // summary: one line
	Desc   string // more, when the summary does not say it all
	Auth   auth
	Query  []string // query parameters
	// Body is a value of the request body's type (nil: no body); RawBody says the body is not JSON (its media type).
	Body    any
	RawBody string
	// Status is the success status [200]; Resp a value of its body's type (nil: none, e.g. 204); RespType the
	// media type of a non-JSON answer (text/plain diagrams and logs).
	Status   int
	Resp     any
	RespType string
	// Also are other success statuses with the same body (e.g. 202 besides 200).
	Also []int
}

type auth int

const (
	authPublic   auth = iota // no credentials
	authOptional             // a bearer token when there is one; a signed token or the resource's own rule otherwise
	authUser                 // a bearer token (user or API token)
	authAdmin                // a bearer token of an admin
)

// apiAreas lists every area's operations; a new area's list is added here.
func apiAreas() [][]apiOp {
	return [][]apiOp{openapiOps, openapiPeople, openapiTemplates, openapiInstances, openapiPlugins, openapiSubscriptions, openapiNotifications, openapiAttachments}
}

// allOps returns every documented operation.
func allOps() []apiOp {
	var ops []apiOp
	for _, a := range apiAreas() {
		ops = append(ops, a...)
	}
	return ops
}

// openapiMethods are the methods an OpenAPI path item can hold; "ANY" stands for all of them (gin's Any also
// registers CONNECT, which OpenAPI cannot describe).
var openapiMethods = []string{http.MethodGet, http.MethodPut, http.MethodPost, http.MethodDelete, http.MethodOptions, http.MethodHead,
	http.MethodPatch, http.MethodTrace}

var ginParam = regexp.MustCompile(`[:*]([A-Za-z0-9_]+)`)

// openapiPath turns a gin path into an OpenAPI path (/instances/:id → /instances/{id}).
func openapiPath(p string) string { return ginParam.ReplaceAllString(p, "{$1}") }

// apiDocsPath is the readable page of the document.
const apiDocsPath = "/api/docs"

var (
	openapiOnce sync.Once
	openapiDoc  []byte
	openapiErr  error
)

// OpenAPI returns the document (JSON), built once.
func OpenAPI() ([]byte, error) {
	openapiOnce.Do(func() {
		doc, err := buildOpenAPI(allOps())
		if err == nil {
			openapiDoc, err = json.MarshalIndent(doc, "", "  ")
		}
		openapiErr = err
	})
	return openapiDoc, openapiErr
}

func (s *Server) openapi(c *gin.Context) {
	b, err := OpenAPI()
	if err != nil {
		fail(c, err)
		return
	}
	c.Header("Cache-Control", "public, max-age=3600")
	c.Data(http.StatusOK, "application/json", b)
}

// apiDocs is the readable page of the document: the web app's api-docs.html, which bundles the renderer (no CDN).
// Without a UI build it says where the document is.
func (s *Server) apiDocs(c *gin.Context) {
	if s.ui != nil {
		if f, err := s.ui.Open("api-docs.html"); err == nil {
			defer f.Close() //nolint:errcheck // opened read-only
			if st, err := f.Stat(); err == nil {
				c.Header("Cache-Control", "no-cache")
				http.ServeContent(c.Writer, c.Request, "api-docs.html", st.ModTime(), f)
				return
			}
		}
	}
	c.Data(http.StatusOK, "text/html; charset=utf-8", []byte(`<!doctype html><meta charset="utf-8"><title>Halley API</title>
<p>The web UI (which renders this page) is not built into this binary. The API is described by the OpenAPI document at
<a href="/api/v1/openapi.json">/api/v1/openapi.json</a>.</p>`))
}

type schemas struct {
	r     *jsonschema.Reflector
	defs  map[string]any
	types map[string]reflect.Type // component name → its Go type
}

func newSchemas() *schemas {
	s := &schemas{defs: map[string]any{}, types: map[string]reflect.Type{}}
	s.r = &jsonschema.Reflector{
		AllowAdditionalProperties:  true,
		RequiredFromJSONSchemaTags: true, // a field is required only where its tag says so: answers omit empty ones
		Namer: func(t reflect.Type) string {
			n := schemaName(t)
			if n != "" {
				s.types[n] = t
			}
			return n
		},
		Mapper: func(t reflect.Type) *jsonschema.Schema {
			switch t {
			case reflect.TypeFor[model.Definition](), reflect.TypeFor[*model.Definition]():
				return &jsonschema.Schema{Ref: apiBase + "/schemas/definition.json"} // served since issue 17
			case reflect.TypeFor[json.RawMessage]():
				return &jsonschema.Schema{Description: "any JSON value"}
			}
			return nil
		},
	}
	return s
}

var schemaNameClean = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// schemaName names a component by its package and type (engine.InstanceView), generic arguments included.
func schemaName(t reflect.Type) string {
	name := t.Name()
	if name == "" {
		return "" // slices, maps, pointers: inlined, never a component
	}
	name = strings.ReplaceAll(name, "github.com/halley-bpm/halley/", "")
	pkg := t.PkgPath()
	if i := strings.LastIndex(pkg, "/"); i >= 0 {
		pkg = pkg[i+1:]
	}
	return strings.Trim(schemaNameClean.ReplaceAllString(pkg+"."+name, "_"), "_")
}

// of returns the schema of v's type, moving its definitions to components/schemas.
func (s *schemas) of(v any) (any, error) {
	sch := s.r.Reflect(v)
	nullable(sch.Properties, reflect.TypeOf(v))
	for name, d := range sch.Definitions {
		if t, ok := s.types[name]; ok {
			nullable(d.Properties, t)
		}
	}
	b, err := json.Marshal(sch)
	if err != nil {
		return nil, err
	}
	b = []byte(strings.ReplaceAll(string(b), `"#/$defs/`, `"#/components/schemas/`))
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	delete(m, "$schema")
	delete(m, "$id")
	if defs, ok := m["$defs"].(map[string]any); ok {
		for k, d := range defs {
			s.defs[k] = d
		}
		delete(m, "$defs")
	}
	return m, nil
}

// nullable lets the properties of t's fields that encoding/json writes as null when empty (pointers, slices,
// maps, interfaces) be null too, and makes a raw "definition" field the definition schema (served since issue 17).
func nullable(props *orderedmap.OrderedMap[string, *jsonschema.Schema], t reflect.Type) {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if props == nil || t == nil || t.Kind() != reflect.Struct {
		return
	}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			nullable(props, f.Type) // embedded: its fields are the struct's
			continue
		}
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if name == "definition" && f.Type == reflect.TypeFor[json.RawMessage]() { // a template definition, kept raw
			props.Set(name, &jsonschema.Schema{AnyOf: []*jsonschema.Schema{{Ref: apiBase + "/schemas/definition.json"}, {Type: "null"}}})
			continue
		}
		switch f.Type.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Map, reflect.Interface:
		default:
			continue
		}
		p, ok := props.Get(name)
		if !ok || p == nil || p.Ref == "" && p.Type == "" {
			continue // absent, or any value already
		}
		props.Set(name, &jsonschema.Schema{AnyOf: []*jsonschema.Schema{p, {Type: "null"}}, Description: p.Description})
	}
}

// errorResponse is the one error shape of API.md.
var errorSchema = map[string]any{
	"type":     "object",
	"required": []string{"error"},
	"properties": map[string]any{"error": map[string]any{
		"type":     "object",
		"required": []string{"code", "message"},
		"properties": map[string]any{
			"code":    map[string]any{"type": "string", "description": "machine-readable: not_found, conflict, weak_password, correlation_taken..."},
			"message": map[string]any{"type": "string", "description": "for people"},
			"details": map[string]any{"description": "what went wrong where, e.g. the validation errors of a definition"},
		},
	}},
}

func buildOpenAPI(ops []apiOp) (map[string]any, error) {
	sc := newSchemas()
	paths := map[string]map[string]any{}
	for _, op := range ops {
		o, err := operation(sc, op)
		if err != nil {
			return nil, fmt.Errorf("openapi: %s %s: %w", op.Method, op.Path, err)
		}
		p := openapiPath(op.Path)
		if paths[p] == nil {
			paths[p] = map[string]any{}
		}
		methods := []string{op.Method}
		if op.Method == "ANY" {
			methods = openapiMethods
		}
		for _, m := range methods {
			key := strings.ToLower(m)
			if _, dup := paths[p][key]; dup {
				return nil, fmt.Errorf("openapi: %s %s is listed twice", m, op.Path)
			}
			oo := o
			if len(methods) > 1 {
				oo = cloneOp(o, m)
			}
			paths[p][key] = oo
		}
	}
	sc.defs["Error"] = errorSchema
	tags := []map[string]any{}
	seen := map[string]bool{}
	for _, op := range ops {
		if !seen[op.Tag] {
			seen[op.Tag] = true
			tags = append(tags, map[string]any{"name": op.Tag})
		}
	}
	sort.Slice(tags, func(i, j int) bool { return tags[i]["name"].(string) < tags[j]["name"].(string) })
	return map[string]any{
		"openapi":           "3.1.0",
		"jsonSchemaDialect": "https://json-schema.org/draft/2020-12/schema",
		"info": map[string]any{
			"title":       "Halley BPM API",
			"version":     "v1",
			"description": "Every route of Halley's HTTP API. Errors are `{\"error\":{\"code\",\"message\",\"details\"}}`. Lists are `{\"items\":[...],\"next_cursor\"}`; pass `?cursor=` and `?limit=` to page. Template definitions follow the JSON Schema at /api/v1/schemas/definition.json.",
			"license":     map[string]any{"name": "see the repository"},
		},
		"tags":  tags,
		"paths": paths,
		"components": map[string]any{
			"schemas": sc.defs,
			"securitySchemes": map[string]any{
				"bearer": map[string]any{"type": "http", "scheme": "bearer", "description": "A session token from POST /api/v1/auth/login, or an API token (POST /api/v1/tokens)."},
			},
			"responses": map[string]any{
				"Error": map[string]any{"description": "An error, in API.md's shape.",
					"content": map[string]any{"application/json": map[string]any{"schema": map[string]any{"$ref": "#/components/schemas/Error"}}}},
			},
		},
	}, nil
}

func cloneOp(o map[string]any, method string) map[string]any {
	c := make(map[string]any, len(o))
	for k, v := range o {
		c[k] = v
	}
	c["operationId"] = o["operationId"].(string) + "_" + strings.ToLower(method)
	return c
}

var opIDClean = regexp.MustCompile(`[^A-Za-z0-9]+`)

func operation(sc *schemas, op apiOp) (map[string]any, error) {
	if op.Tag == "" || op.Sum == "" {
		return nil, fmt.Errorf("needs a tag and a summary")
	}
	method := op.Method
	if method == "ANY" {
		method = "any"
	}
	o := map[string]any{
		"operationId": strings.Trim(opIDClean.ReplaceAllString(strings.ToLower(method)+" "+strings.TrimPrefix(op.Path, apiBase), "_"), "_"),
		"summary":     op.Sum,
		"tags":        []string{op.Tag},
	}
	if op.Desc != "" {
		o["description"] = op.Desc
	}
	switch op.Auth {
	case authPublic:
		o["security"] = []any{}
	case authOptional:
		o["security"] = []any{map[string]any{}, map[string]any{"bearer": []string{}}}
	case authUser:
		o["security"] = []any{map[string]any{"bearer": []string{}}}
	case authAdmin:
		o["security"] = []any{map[string]any{"bearer": []string{}}}
		o["description"] = strings.TrimSpace(op.Desc + " Admins only.")
	}
	var params []any
	for _, m := range ginParam.FindAllStringSubmatch(op.Path, -1) {
		params = append(params, map[string]any{"name": m[1], "in": "path", "required": true, "schema": map[string]any{"type": "string"}})
	}
	for _, q := range op.Query {
		params = append(params, map[string]any{"name": q, "in": "query", "required": false, "schema": map[string]any{"type": "string"}})
	}
	if len(params) > 0 {
		o["parameters"] = params
	}
	switch {
	case op.RawBody != "":
		o["requestBody"] = map[string]any{"required": true, "content": map[string]any{op.RawBody: map[string]any{}}}
	case op.Body != nil:
		s, err := sc.of(op.Body)
		if err != nil {
			return nil, err
		}
		o["requestBody"] = map[string]any{"required": true, "content": map[string]any{"application/json": map[string]any{"schema": s}}}
	}
	status := op.Status
	if status == 0 {
		status = http.StatusOK
	}
	ok := map[string]any{"description": http.StatusText(status)}
	switch {
	case op.RespType != "":
		ok["content"] = map[string]any{op.RespType: map[string]any{"schema": map[string]any{"type": "string"}}}
	case op.Resp != nil:
		s, err := sc.of(op.Resp)
		if err != nil {
			return nil, err
		}
		ok["content"] = map[string]any{"application/json": map[string]any{"schema": s}}
	}
	responses := map[string]any{fmt.Sprint(status): ok, "4XX": map[string]any{"$ref": "#/components/responses/Error"},
		"5XX": map[string]any{"$ref": "#/components/responses/Error"}}
	for _, st := range op.Also {
		also := map[string]any{"description": http.StatusText(st)}
		if c, ok := ok["content"]; ok {
			also["content"] = c
		}
		responses[fmt.Sprint(st)] = also
	}
	o["responses"] = responses
	return o, nil
}
