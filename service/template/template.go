// Package template manages process templates: drafts, validation, publishing immutable versions, Mermaid
// diagrams, and the in-memory cache of compiled published versions that the engine runs (they never change, so
// they are compiled once per process).
package template

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/tidwall/gjson"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/clock"
	"github.com/halley-bpm/halley/service/condition"
	"github.com/halley-bpm/halley/service/graph"
)

// Compiled is a published version ready to run: the indexed definition and each edge's compiled condition.
type Compiled struct {
	Key string
	// Name is the template's name (set at creation, never renamed): an instance started without a title takes it.
	Name       string
	Version    int
	Def        *model.Definition
	Conditions []*condition.Condition // by edge index; nil = always taken
	Raw        json.RawMessage
	// Hidden marks the one-off version of a dynamic linear process: it is started once, by CreateLinear.
	Hidden bool
	// fileFields are the context paths that a form of the version (the start form, a node's form) declares as
	// file fields: what a start puts there must be files (CheckFiles).
	fileFields []string
	out, in    map[string][]int // edge indexes by source and by target
}

// CheckFiles validates the values doc (a new instance's context) holds at the file fields of the version's forms,
// whatever way the instance starts (POST /instances, /instances/linear, a form, an API trigger, a message): a
// value shown to approvers as a download must be a list of files, never a link (javascript:, http:) in disguise.
// EUNPROCESSABLE invalid_file naming the field.
func (c *Compiled) CheckFiles(doc json.RawMessage) error {
	for _, path := range c.fileFields {
		if v := gjson.GetBytes(doc, path); v.Exists() {
			if err := model.CheckFileValue(path, json.RawMessage(v.Raw)); err != nil {
				return err
			}
		}
	}
	return nil
}

// fileFieldsOf lists the file fields of every form of def, each path once.
func fileFieldsOf(def *model.Definition) []string {
	var out []string
	add := func(raw json.RawMessage) {
		f := model.ParseForm(raw)
		if f == nil {
			return
		}
		for _, x := range f.Fields {
			if x.IsFile() && x.Field != "" && !slices.Contains(out, x.Field) {
				out = append(out, x.Field)
			}
		}
	}
	for i := range def.Nodes {
		n := &def.Nodes[i]
		add(n.Trigger.Form)
		add(n.Form)
	}
	return out
}

// OutgoingIndexes returns the indexes (into Def.Edges) of the edges leaving node id, in definition order.
func (c *Compiled) OutgoingIndexes(id string) []int { return c.out[id] }

// IncomingIndexes returns the indexes of the edges entering node id.
func (c *Compiled) IncomingIndexes(id string) []int { return c.in[id] }

// Publisher is told about every new version (the trigger service arms crontab starts and API routes with it).
// Publishers are given to New (WithPublishers): "version published" flows from templates to whoever listens, never back.
type Publisher interface {
	// CheckPublish may refuse a version before it is stored (e.g. an API route owned by another template).
	CheckPublish(ctx context.Context, tenant, key string, c *Compiled) error
	// Published runs after the version is stored.
	Published(ctx context.Context, tenant, key string, c *Compiled)
}

// Store is what the template service keeps in the database: the templates and their versions, and which names
// are users (the unknown_user warning of ValidateFor).
type Store interface {
	model.TemplateStore
	// UserStates answers, for each name that is a user, whether it is disabled; other names are left out.
	UserStates(ctx context.Context, tenant string, names []string) (map[string]bool, error)
}

// Service is the template service.
type Service struct {
	store     Store
	now       func() time.Time
	cache     sync.Map // cacheKey → *Compiled
	latest    latestVersions
	listeners []Publisher
	// secretKey keys the HMAC that trigger secrets are stored as (secrets.go).
	secretKey []byte
}

// Options tune the service; the zero value is the default.
type Options struct {
	Clock clock.Clock // default clock.Real{}
	// Publishers are told about every version published, in order.
	Publishers []Publisher
	// SecretKey is the key trigger secrets are stored with (derived from HALLEY_SECRET). Without it a fixed
	// development key is used: tests and tools only.
	SecretKey []byte
}

type cacheKey struct {
	tenant, key string
	version     int
}

// New returns the service.
func New(store Store, opts Options) *Service {
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	if opts.SecretKey == nil {
		opts.SecretKey = []byte("halley-development-trigger-secret-key")
	}
	return &Service{store: store, now: opts.Clock.Now, listeners: opts.Publishers, secretKey: opts.SecretKey}
}

// ValidationOptions wires the MongoDB-style condition compiler into graph validation.
var validationOptions = graph.Options{CheckCondition: func(raw []byte) error {
	_, err := condition.Compile(raw)
	return err
}}

// Validate checks a definition and reports every problem.
func Validate(def []byte) graph.Result { return graph.Validate(def, validationOptions) }

// ValidateFor validates a definition like Validate and adds a warning (unknown_user) for each static user of an
// approvers or cc list that is no user of the tenant: publishing is allowed (the user may be created later),
// but at run time such an approver is dropped.
func (s *Service) ValidateFor(ctx context.Context, tenant string, def []byte) (graph.Result, error) {
	r, d := graph.ValidateParsed(def, validationOptions)
	if d == nil {
		return r, nil
	}
	nodesOf := map[string][]string{}
	var names []string
	add := func(node string, users ...string) {
		for _, u := range users {
			u = strings.TrimSpace(u)
			if u == "" || slices.Contains(nodesOf[u], node) {
				continue
			}
			if len(nodesOf[u]) == 0 {
				names = append(names, u)
			}
			nodesOf[u] = append(nodesOf[u], node)
		}
	}
	for _, n := range d.Nodes {
		add(n.ID, n.Approvers.Users...)
		for _, g := range n.Approvers.Groups {
			add(n.ID, g...)
		}
		add(n.ID, n.CC.Users...)
	}
	if len(names) == 0 {
		return r, nil
	}
	known, err := s.store.UserStates(ctx, tenant, names)
	if err != nil {
		return r, err
	}
	for _, u := range names {
		if _, ok := known[u]; !ok {
			r.Warnings = append(r.Warnings, model.NewValidationError(model.CodeUnknownUser, nodesOf[u],
				"user %q does not exist: until it does, it is dropped from the approvers when the node runs", u))
		}
	}
	return r, nil
}

// View is a template as the API shows it.
type View struct {
	Key           string                   `json:"key"`
	Name          string                   `json:"name"`
	Description   string                   `json:"description"`
	I18n          model.TemplateLabels     `json:"i18n,omitempty"`
	Draft         *DraftView               `json:"draft,omitempty"`
	LatestVersion *int                     `json:"latest_version"`
	StartKind     string                   `json:"start_kind,omitempty"`
	Versions      []*model.TemplateVersion `json:"versions,omitempty"`
	CreatedBy     string                   `json:"created_by"`
	CreatedAt     time.Time                `json:"created_at"`
	UpdatedAt     time.Time                `json:"updated_at"`
	Validation    *graph.Result            `json:"validation,omitempty"`
}

// DraftView is the draft of a template.
type DraftView struct {
	Definition json.RawMessage `json:"definition"`
	UpdatedAt  time.Time       `json:"updated_at"`
}

func view(t *model.Template) *View {
	v := &View{Key: t.Key, Name: t.Name, Description: t.Description, I18n: t.I18n, LatestVersion: t.LatestVersion, StartKind: t.StartKind,
		CreatedBy: t.CreatedBy, CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt}
	if len(t.Draft) > 0 {
		v.Draft = &DraftView{Definition: RedactSecrets(t.Draft), UpdatedAt: t.DraftUpdatedAt}
	}
	return v
}

// CreateRequest is the body of POST /templates.
type CreateRequest struct {
	Key         string          `json:"key"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Definition  json.RawMessage `json:"definition"`
}

// normaliseDefinition checks that a definition is a JSON object (the draft may be invalid as a graph, but it
// must be a definition-shaped document) and compacts it. Its trigger secrets are still as sent (see keepSecrets).
func normaliseDefinition(raw json.RawMessage) (json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return json.RawMessage(`{"nodes":[],"edges":[]}`), nil
	}
	if raw[0] != '{' {
		return nil, model.CodedError(model.EINVALID, "invalid_definition", "definition must be a JSON object with nodes and edges")
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, model.CodedError(model.EINVALID, "invalid_definition", "definition is not valid JSON: %v", err)
	}
	return buf.Bytes(), nil
}

// Create stores a new template with its draft. ECONFLICT when the key exists.
func (s *Service) Create(ctx context.Context, actor *model.Principal, req CreateRequest) (*View, error) {
	if err := model.ValidTemplateKey(req.Key); err != nil {
		return nil, err
	}
	name := strings.TrimSpace(req.Name)
	if name == "" {
		name = req.Key
	}
	if len(name) > maxNameLen || len(req.Description) > 10000 {
		return nil, model.CodedError(model.EINVALID, "invalid_field", "name must be at most 200 characters and description at most 10000")
	}
	if err := model.CheckName("name", name, maxNameLen); err != nil {
		return nil, err
	}
	def, err := normaliseDefinition(req.Definition)
	if err != nil {
		return nil, err
	}
	if def, err = s.keepSecrets(def, nil); err != nil {
		return nil, err
	}
	t := &model.Template{TenantID: actor.TenantID, Key: req.Key, Name: name, Description: req.Description, Draft: def, CreatedBy: actor.Username}
	if err := s.store.CreateTemplate(ctx, t); err != nil {
		return nil, err
	}
	v := view(t)
	r, err := s.ValidateFor(ctx, actor.TenantID, def)
	if err != nil {
		return nil, err
	}
	v.Validation = &r
	return v, nil
}

// SaveDraft replaces the draft, even when it is invalid, and returns the template with the validation.
func (s *Service) SaveDraft(ctx context.Context, actor *model.Principal, key string, raw json.RawMessage) (*View, error) {
	def, err := normaliseDefinition(raw)
	if err != nil {
		return nil, err
	}
	prev, err := s.store.GetTemplate(ctx, actor.TenantID, key)
	if err != nil {
		return nil, err
	}
	if def, err = s.keepSecrets(def, prev.Draft); err != nil {
		return nil, err
	}
	if err := s.store.SaveDraft(ctx, actor.TenantID, key, def, s.now()); err != nil {
		return nil, err
	}
	t, err := s.store.GetTemplate(ctx, actor.TenantID, key)
	if err != nil {
		return nil, err
	}
	v := view(t)
	r, err := s.ValidateFor(ctx, actor.TenantID, def)
	if err != nil {
		return nil, err
	}
	v.Validation = &r
	return v, nil
}

// Publish stores the draft as the next version. EUNPROCESSABLE with details.errors when it is invalid.
func (s *Service) Publish(ctx context.Context, actor *model.Principal, key string) (*model.TemplateVersion, error) {
	t, err := s.store.GetTemplate(ctx, actor.TenantID, key)
	if err != nil || t.Hidden {
		if err == nil {
			err = model.Errorf(model.ENOTFOUND, "template %q not found", key)
		}
		return nil, err
	}
	c, err := compile(key, 0, t.Draft)
	if err != nil {
		return nil, err
	}
	for _, p := range s.listeners {
		if err := p.CheckPublish(ctx, actor.TenantID, key, c); err != nil {
			return nil, err
		}
	}
	v, err := s.store.PublishVersion(ctx, actor.TenantID, key, t.Draft, actor.Username, s.now(), nil)
	if err != nil {
		return nil, err
	}
	c.Version, c.Name = v.Version, t.Name
	s.cache.Store(cacheKey{actor.TenantID, key, v.Version}, c)
	s.latest.put(actor.TenantID, key, v.Version, s.now())
	for _, p := range s.listeners {
		p.Published(ctx, actor.TenantID, key, c)
	}
	return v, nil
}

// compile validates and compiles a definition. EUNPROCESSABLE with the validation errors when it is invalid.
func compile(key string, version int, raw json.RawMessage) (*Compiled, error) {
	def, perrs := graph.Parse(raw)
	errs := perrs
	if def != nil && len(perrs) == 0 {
		errs = graph.Check(def, validationOptions)
	}
	if len(errs) > 0 {
		return nil, model.CodedError(model.EUNPROCESSABLE, "invalid_definition", "the definition has %d problem(s); the first: %s", len(errs), errs[0].Message).
			WithDetails(map[string]any{"errors": errs})
	}
	c := &Compiled{Key: key, Version: version, Def: def.Index(), Raw: raw, Conditions: make([]*condition.Condition, len(def.Edges)),
		out: map[string][]int{}, in: map[string][]int{}, fileFields: fileFieldsOf(def)}
	for i, e := range def.Edges {
		c.out[e.From] = append(c.out[e.From], i)
		c.in[e.To] = append(c.in[e.To], i)
		if e.HasCondition() {
			cond, err := condition.Compile(e.Condition)
			if err != nil {
				return nil, fmt.Errorf("template: condition of %s passed validation but does not compile: %w", e.Label(), err)
			}
			c.Conditions[i] = cond
		}
	}
	return c, nil
}

// Compiled returns a published version compiled, from the cache when it was compiled before. version 0 means
// the latest. ENOTFOUND for an unknown template or version; EUNPROCESSABLE when a template has no version yet.
func (s *Service) Compiled(ctx context.Context, tenant, key string, version int) (*Compiled, error) {
	if version == 0 {
		latest, ok := s.latest.get(tenant, key, s.now())
		if !ok {
			read, err := s.store.LatestVersion(ctx, tenant, key)
			if err != nil {
				return nil, err
			}
			if read == 0 {
				return nil, model.CodedError(model.EUNPROCESSABLE, "not_published", "template %q has no published version yet", key)
			}
			latest = read
			s.latest.put(tenant, key, latest, s.now())
		}
		version = latest
	}
	ck := cacheKey{tenant, key, version}
	if c, ok := s.cache.Load(ck); ok {
		return c.(*Compiled), nil
	}
	v, err := s.store.GetVersion(ctx, tenant, key, version)
	if err != nil {
		return nil, err
	}
	t, err := s.store.GetTemplate(ctx, tenant, key)
	if err != nil {
		return nil, err
	}
	c, err := compile(key, version, v.Definition)
	if err != nil {
		return nil, fmt.Errorf("template: stored version %s@%d no longer compiles: %w", key, version, err)
	}
	c.Hidden, c.Name = t.Hidden, t.Name
	s.cache.Store(ck, c)
	return c, nil
}

// Get returns a template with its draft and its versions.
func (s *Service) Get(ctx context.Context, tenant, key string) (*View, error) {
	t, err := s.store.GetTemplate(ctx, tenant, key)
	if err != nil {
		return nil, err
	}
	if t.Hidden {
		return nil, model.Errorf(model.ENOTFOUND, "template %q not found", key)
	}
	vs, err := s.store.ListVersions(ctx, tenant, key)
	if err != nil {
		return nil, err
	}
	v := view(t)
	v.Versions = vs
	r, err := s.ValidateFor(ctx, tenant, t.Draft)
	if err != nil {
		return nil, err
	}
	v.Validation = &r
	return v, nil
}

// List pages through templates.
func (s *Service) List(ctx context.Context, tenant string, page model.Page) ([]*View, string, error) {
	ts, next, err := s.store.ListTemplates(ctx, tenant, page)
	if err != nil {
		return nil, "", err
	}
	out := make([]*View, len(ts))
	for i, t := range ts {
		out[i] = view(t)
	}
	return out, next, nil
}

// GetVersion returns one published version, its trigger secrets shown as "***". Hidden (linear) templates are
// readable by key for instance display: the caller checks who may (see Hidden).
func (s *Service) GetVersion(ctx context.Context, tenant, key string, version int) (*model.TemplateVersion, error) {
	v, err := s.store.GetVersion(ctx, tenant, key, version)
	if err != nil {
		return nil, err
	}
	out := *v
	out.Definition = RedactSecrets(v.Definition)
	return &out, nil
}

// Hidden reports whether a template is hidden (the one-off template of a dynamic linear process): only the
// readers of its instance may see it. ENOTFOUND for an unknown template.
func (s *Service) Hidden(ctx context.Context, tenant, key string) (bool, error) {
	t, err := s.store.GetTemplate(ctx, tenant, key)
	if err != nil {
		return false, err
	}
	return t.Hidden, nil
}

// Diagram renders a version (with node states when given) as a Mermaid flowchart, in lang (see InstanceDiagram).
func (s *Service) Diagram(ctx context.Context, tenant, key string, version int, states map[string]model.NodeState, lang string) (string, error) {
	return s.InstanceDiagram(ctx, tenant, key, version, states, nil, "", nil, lang)
}

// InstanceDiagram renders a version with an instance's node states and edge states (model.Edge*, index-aligned
// with the definition's edges): taken, pruned and killed edges are drawn differently, and failed (when not "")
// names the node whose error failed the instance.
//
// notes adds a line to the label of a node (by id).
//
// lang "" draws the plain names and each condition's short text (`days > 3 or lead_review.escalate = true`), the
// same for every client; model.LangZhCN or model.LangEN draws the nodes' names in that language and each condition
// as people read it there, with the forms' field labels (`天数 > 3 或 领导审批.上报 = 是`, condition.Readable and
// ConditionFields), cut to about 60 characters.
func (s *Service) InstanceDiagram(ctx context.Context, tenant, key string, version int, states map[string]model.NodeState, edges []byte, failed string,
	notes map[string]string, lang string) (string, error) {
	c, err := s.Compiled(ctx, tenant, key, version)
	if err != nil {
		return "", err
	}
	var fields map[string]condition.Field
	if lang != "" {
		fields = ConditionFields(c.Def, lang)
	}
	labels := make(map[string]string, len(c.Def.Edges))
	for i, e := range c.Def.Edges {
		if c.Conditions[i] == nil {
			continue
		}
		if lang == "" {
			labels[edgeKey(e)] = c.Conditions[i].String()
		} else {
			labels[edgeKey(e)] = graph.CutLabel(c.Conditions[i].Readable(lang, fields))
		}
	}
	var edgeStates []string
	if edges != nil {
		edgeStates = make([]string, len(c.Def.Edges))
		for i := range edgeStates {
			if i < len(edges) {
				switch edges[i] {
				case model.EdgeTaken:
					edgeStates[i] = graph.EdgeTaken
				case model.EdgePruned:
					edgeStates[i] = graph.EdgePruned
				case model.EdgeKilled, model.EdgeDead:
					edgeStates[i] = graph.EdgeKilled
				}
			}
		}
	}
	var callee func(n *model.Node) string
	if lang != "" {
		callee = s.calleeNames(ctx, tenant, c.Def, lang)
	}
	return graph.MermaidCalling(lang, c.Def, states, edgeStates, failed, func(e model.Edge) string { return labels[edgeKey(e)] }, notes, callee), nil
}

// calleeNames names the templates d's subprocess nodes call, in lang: each called version's name there (its
// definition's i18n), else the template's name. The versions come compiled from the cache (a version 0 costs
// the lookup of the latest); one that cannot be read (deleted, not published) keeps its key.
func (s *Service) calleeNames(ctx context.Context, tenant string, d *model.Definition, lang string) func(n *model.Node) string {
	type ref struct {
		key     string
		version int
	}
	names := map[ref]string{}
	for i := range d.Nodes {
		n := &d.Nodes[i]
		r := ref{n.Template, n.Version}
		if n.Type != model.NodeSubprocess || n.Template == "" {
			continue
		}
		if _, done := names[r]; done {
			continue
		}
		names[r] = ""
		c, err := s.Compiled(ctx, tenant, r.key, r.version)
		if err != nil {
			continue
		}
		if t := c.Def.I18n.For(lang); t != nil && t.Name != "" {
			names[r] = t.Name
		} else {
			names[r] = c.Name
		}
	}
	return func(n *model.Node) string { return names[ref{n.Template, n.Version}] }
}

func edgeKey(e model.Edge) string { return e.From + "\x00" + e.To + "\x00" + string(e.Condition) }

// A dynamic linear process lists its approvers by name in the request: at most MaxLinearStepApprovers per step
// and MaxLinearApprovers in all (422 too_many_approvers). Thousands of named people in one ad-hoc request is a
// mistake or an abuse, and each becomes a task row; a role reaches any number of people.
const (
	MaxLinearStepApprovers = 200
	MaxLinearApprovers     = 1000
)

// LinearStep is one step of a dynamic linear process: an approval node, with every field an approval node of a
// template has (docs/templates.md), checked by the same validator.
type LinearStep struct {
	Name             string             `json:"name"`
	Approvers        model.Approvers    `json:"approvers"`
	Sign             string             `json:"sign"`
	PassRatio        float64            `json:"pass_ratio,omitempty"`
	GroupSign        string             `json:"group_sign,omitempty"`
	Plugins          model.Plugins      `json:"plugins,omitzero"`
	CC               model.Approvers    `json:"cc,omitzero"`
	Timeout          model.Duration     `json:"timeout,omitzero"`
	OnTimeout        model.OnTimeout    `json:"on_timeout,omitzero"`
	Form             json.RawMessage    `json:"form,omitempty"`
	OnNoApprover     string             `json:"on_no_approver,omitempty"`
	ExcludeInitiator bool               `json:"exclude_initiator,omitempty"`
	ErrorHandler     model.ErrorHandler `json:"error_handler,omitzero"`
}

// CreateLinear builds a one-off version start → step1 → ... → end (seeds/003 动态线性流程), validates it like
// any template and stores it hidden. It returns the compiled version.
func (s *Service) CreateLinear(ctx context.Context, actor *model.Principal, title string, steps []LinearStep) (*Compiled, error) {
	if len(steps) == 0 || len(steps) > 100 {
		return nil, model.CodedError(model.EINVALID, "invalid_steps", "steps must hold 1 to 100 steps")
	}
	if err := model.CheckName("title", title, 500); err != nil {
		return nil, err
	}
	total := 0
	for i, st := range steps {
		if model.HasControl(st.Name) {
			return nil, model.CodedError(model.EINVALID, "invalid_steps", "step %d: name must not contain control characters", i+1)
		}
		n := len(st.Approvers.Users) + len(st.Approvers.Roles)
		for _, g := range st.Approvers.Groups {
			n += len(g)
		}
		if n > MaxLinearStepApprovers {
			return nil, model.CodedError(model.EUNPROCESSABLE, "too_many_approvers", "step %d lists %d approvers; a step may list at most %d (use a role for more)", i+1, n, MaxLinearStepApprovers).
				WithDetails(map[string]any{"step": i + 1, "approvers": n, "max": MaxLinearStepApprovers})
		}
		total += n
	}
	if total > MaxLinearApprovers {
		return nil, model.CodedError(model.EUNPROCESSABLE, "too_many_approvers", "the steps list %d approvers; a linear process may list at most %d", total, MaxLinearApprovers).
			WithDetails(map[string]any{"approvers": total, "max": MaxLinearApprovers})
	}
	def := linearDefinition(steps)
	raw, err := json.Marshal(&def)
	if err != nil {
		return nil, err
	}
	key := "linear-" + uuid.Must(uuid.NewV7()).String()
	c, err := compile(key, 1, raw)
	if err != nil {
		if de, ok := err.(*model.Error); ok {
			de.Code = "invalid_steps"
			nameStep(de)
		}
		return nil, err
	}
	// The title may be 500 characters (an instance's title); the hidden template's name keeps the first 200.
	t := &model.Template{TenantID: actor.TenantID, Key: key, Name: clipRunes(title, maxNameLen), Hidden: true, CreatedBy: actor.Username}
	v := &model.TemplateVersion{TenantID: actor.TenantID, Key: key, Version: 1, Definition: raw, PublishedBy: actor.Username}
	if err := s.store.CreateHiddenVersion(ctx, t, v); err != nil {
		return nil, err
	}
	c.Hidden, c.Name = true, t.Name
	s.cache.Store(cacheKey{actor.TenantID, key, 1}, c)
	return c, nil
}

// nameStep says which step a linear process's first validation error is about: the message starts with
// "step N: " and details.step is N (the nodes of a linear process are step1, step2, ...).
func nameStep(de *model.Error) {
	errs, _ := de.Details["errors"].([]model.ValidationError)
	if len(errs) == 0 {
		return
	}
	for _, id := range errs[0].Nodes {
		var n int
		if _, err := fmt.Sscanf(id, "step%d", &n); err == nil && n > 0 {
			de.Message = fmt.Sprintf("step %d: %s", n, de.Message)
			de.Details["step"] = n
			return
		}
	}
}

// linearDefinition is the definition of a linear process: start → step1 → ... → end.
func linearDefinition(steps []LinearStep) model.Definition {
	def := model.Definition{Nodes: []model.Node{{ID: "start", Type: model.NodeStart, Name: "Start", Trigger: model.Trigger{Kind: model.TriggerManual}}}}
	prev := "start"
	for i, st := range steps {
		id := fmt.Sprintf("step%d", i+1)
		name := strings.TrimSpace(st.Name)
		if name == "" {
			name = fmt.Sprintf("Step %d", i+1)
		}
		def.Nodes = append(def.Nodes, model.Node{ID: id, Type: model.NodeApproval, Name: name, Approvers: st.Approvers, Sign: st.Sign, PassRatio: st.PassRatio,
			GroupSign: st.GroupSign, Plugins: st.Plugins, CC: st.CC, Timeout: st.Timeout, OnTimeout: st.OnTimeout, Form: st.Form,
			OnNoApprover: st.OnNoApprover, ExcludeInitiator: st.ExcludeInitiator, ErrorHandler: st.ErrorHandler})
		def.Edges = append(def.Edges, model.Edge{From: prev, To: id})
		prev = id
	}
	def.Nodes = append(def.Nodes, model.Node{ID: "end", Type: model.NodeEnd, Name: "End"})
	def.Edges = append(def.Edges, model.Edge{From: prev, To: "end"})
	return def
}

// maxNameLen is the length of templates.name.
const maxNameLen = 200

// clipRunes returns s cut to at most n characters.
func clipRunes(s string, n int) string {
	for i := range s {
		if n == 0 {
			return s[:i]
		}
		n--
	}
	return s
}
