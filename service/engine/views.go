package engine

import (
	"context"
	"crypto/hmac"
	"encoding/json"
	"errors"
	"sort"
	"strings"
	"time"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/halley-bpm/halley/model"
)

// InstanceView is an instance as the API shows it.
type InstanceView struct {
	*model.Instance
	// Error is the last unhandled node error (null when there was none): code, node_id, message, data.
	Error *model.NodeFailure `json:"error"`
	Nodes []NodeView         `json:"nodes"`
	Tasks []*model.Task      `json:"tasks"`
	// ParentInstanceID and ParentNodeID name the subprocess node that started this instance (a child), if any.
	ParentInstanceID string `json:"parent_instance_id,omitempty"`
	ParentNodeID     string `json:"parent_node_id,omitempty"`
	// Children are the instances this instance's subprocess nodes started, in the order they started.
	Children []ChildView `json:"children"`
}

// ChildView is a child instance as its parent lists it; its status is the parent's record (a child's end is
// recorded once the outbox carried it to the parent).
type ChildView struct {
	ID       string               `json:"id"`
	Template string               `json:"template"`
	Status   model.InstanceStatus `json:"status"`
	NodeID   string               `json:"node_id"`
	Index    int                  `json:"index"`
}

// NodeView is one node of an instance.
type NodeView struct {
	NodeID         string          `json:"node_id"`
	Name           string          `json:"name"`
	Type           string          `json:"type"`
	State          model.NodeState `json:"state"`
	NodeInstanceID string          `json:"node_instance_id"`
	Visit          int             `json:"visit"`
	StartedAt      *time.Time      `json:"started_at"`
	EndedAt        *time.Time      `json:"ended_at"`
	WaitingFor     string          `json:"waiting_for,omitempty"`
	Error          string          `json:"error,omitempty"`
	ErrorCode      string          `json:"error_code,omitempty"`
	Attempt        int             `json:"attempt,omitempty"`
	CallbackURL    string          `json:"callback_url,omitempty"`
	seq            int
}

func (e *Engine) view(inst *model.Instance, tasks []*model.Task, showSecrets bool) *InstanceView {
	v := &InstanceView{Instance: inst, Error: inst.State.Error, Nodes: []NodeView{}, Tasks: tasks, Children: childViews(inst)}
	if v.Tasks == nil {
		v.Tasks = []*model.Task{}
	}
	if p := inst.State.Parent; p != nil {
		v.ParentInstanceID, v.ParentNodeID = p.InstanceID, p.NodeID
	}
	for _, ns := range inst.State.Nodes {
		if ns.State == model.NodeReset {
			continue
		}
		nv := NodeView{NodeID: ns.NodeID, Name: ns.Name, Type: ns.Type, State: ns.State, NodeInstanceID: ns.NodeInstanceID, Visit: ns.Visit,
			StartedAt: ns.StartedAt, EndedAt: ns.EndedAt, WaitingFor: ns.WaitingFor, Error: ns.Error, ErrorCode: ns.ErrorCode, Attempt: ns.Attempt, seq: ns.Seq}
		if showSecrets && ns.Active() {
			nv.CallbackURL = ns.CallbackURL
		}
		v.Nodes = append(v.Nodes, nv)
	}
	sortNodes(v.Nodes)
	return v
}

// canRead reports whether the principal may see an instance: admins, its initiator, its signers (and those who
// delegated a task of it), people copied.
func (e *Engine) canRead(ctx context.Context, actor *model.Principal, inst *model.Instance, tasks []*model.Task) (bool, error) {
	if actor.IsAdmin() || inst.Initiator == actor.Username {
		return true, nil
	}
	for _, t := range tasks {
		if t.Assignee == actor.Username || t.DelegatedFrom == actor.Username {
			return true, nil
		}
	}
	return e.store.IsCC(ctx, inst.TenantID, inst.ID, actor.Username)
}

func (e *Engine) readable(ctx context.Context, actor *model.Principal, id string) (*model.Instance, []*model.Task, error) {
	inst, tasks, err := e.store.GetInstance(ctx, actor.TenantID, id)
	if err != nil {
		return nil, nil, err
	}
	ok, err := e.canRead(ctx, actor, inst, tasks)
	if err != nil {
		return nil, nil, err
	}
	if !ok {
		return nil, nil, model.CodedError(model.EFORBIDDEN, "not_allowed", "you may not read instance %s", id)
	}
	return inst, tasks, nil
}

// Get returns an instance the principal may read.
func (e *Engine) Get(ctx context.Context, actor *model.Principal, id string) (*InstanceView, error) {
	inst, tasks, err := e.readable(ctx, actor, id)
	if err != nil {
		return nil, err
	}
	return e.view(inst, tasks, systemPrincipal(actor)), nil
}

// List lists instances; non-admins see those they started, sign or were copied on.
func (e *Engine) List(ctx context.Context, actor *model.Principal, f model.InstanceFilter) ([]*model.Instance, string, error) {
	f.TenantID = actor.TenantID
	if !actor.IsAdmin() {
		f.VisibleTo = actor.Username
	}
	if f.Status != "" {
		switch f.Status {
		case model.StatusRunning, model.StatusCompleted, model.StatusRejected, model.StatusTerminated, model.StatusFailed, model.StatusWithdrawn:
		default:
			return nil, "", model.CodedError(model.EINVALID, "invalid_status", "status must be one of running, completed, rejected, terminated, failed, withdrawn")
		}
	}
	return e.store.ListInstances(ctx, f)
}

// NeedsAttention lists, for an admin, the failed instances and the running ones with an open task for a disabled
// or deleted user, each with its reason and error code. Codes: admin_required (403).
func (e *Engine) NeedsAttention(ctx context.Context, actor *model.Principal, p model.Page) ([]*model.AttentionItem, string, error) {
	if !actor.IsAdmin() {
		return nil, "", model.CodedError(model.EFORBIDDEN, "admin_required", "only admins may list the instances needing attention")
	}
	return e.store.ListNeedsAttention(ctx, actor.TenantID, p)
}

// History returns an instance's events, oldest first.
func (e *Engine) History(ctx context.Context, actor *model.Principal, id string) ([]model.HistoryEvent, error) {
	if _, _, err := e.readable(ctx, actor, id); err != nil {
		return nil, err
	}
	return e.store.History(ctx, actor.TenantID, id)
}

// Diagram renders the instance's version with each node's state as a Mermaid class, in lang ("" for the plain
// names and texts, else model.LangZhCN or model.LangEN: template.Service.InstanceDiagram).
func (e *Engine) Diagram(ctx context.Context, actor *model.Principal, id, lang string) (string, error) {
	inst, _, err := e.readable(ctx, actor, id)
	if err != nil {
		return "", err
	}
	states := map[string]model.NodeState{}
	for id, ns := range inst.State.Nodes {
		if ns.State != model.NodeReset {
			states[id] = ns.State
		}
	}
	// Old "dead" edges of an instance not stepped since the upgrade are read as the engine would read them.
	c, err := e.templates.Compiled(ctx, actor.TenantID, inst.Template, inst.Version)
	if err != nil {
		return "", err
	}
	s := &step{e: e, ctx: ctx, c: c, inst: inst, w: &model.Work{Instance: inst}}
	if len(inst.State.Edges) == len(c.Def.Edges) {
		s.upgradeEdges()
	}
	failed := ""
	if inst.Status == model.StatusFailed && inst.State.Error != nil {
		failed = inst.State.Error.NodeID
	}
	return e.templates.InstanceDiagram(ctx, actor.TenantID, inst.Template, inst.Version, states, inst.State.Edges, failed, childNotes(inst, lang), lang)
}

// MayReadHidden says whether the principal may read a hidden template (the one-off template of a dynamic linear
// process, which names its approvers and carries its title): admins and the readers of its instance may.
func (e *Engine) MayReadHidden(ctx context.Context, actor *model.Principal, key string) (bool, error) {
	if actor.IsAdmin() {
		return true, nil
	}
	items, _, err := e.store.ListInstances(ctx, model.InstanceFilter{TenantID: actor.TenantID, Template: key, VisibleTo: actor.Username, Page: model.Page{Limit: 1}})
	return len(items) > 0, err
}

// GetTask returns a task its assignee, an admin, or a reader of its instance may see.
func (e *Engine) GetTask(ctx context.Context, actor *model.Principal, id string) (*model.Task, error) {
	t, err := e.store.GetTask(ctx, actor.TenantID, id)
	if err != nil {
		return nil, err
	}
	if t.Assignee == actor.Username || actor.IsAdmin() || t.Initiator == actor.Username {
		return t, nil
	}
	if _, _, err := e.readable(ctx, actor, t.InstanceID); err != nil {
		return nil, err
	}
	return t, nil
}

// ListTasks lists tasks: by default the caller's pending ones. Admins may list anybody's (assignee=<name> or
// assignee=any).
func (e *Engine) ListTasks(ctx context.Context, actor *model.Principal, f model.TaskFilter) ([]*model.Task, string, error) {
	f.TenantID = actor.TenantID
	switch f.Assignee {
	case "", "me":
		f.Assignee = actor.Username
	case "any":
		if !actor.IsAdmin() {
			return nil, "", model.CodedError(model.EFORBIDDEN, "admin_required", "only admins may list everybody's tasks")
		}
		f.Assignee = ""
	default:
		if f.Assignee != actor.Username && !actor.IsAdmin() {
			return nil, "", model.CodedError(model.EFORBIDDEN, "admin_required", "only admins may list other people's tasks")
		}
	}
	switch f.Status {
	case "":
		f.Status = model.TaskPending
	case "all", "any":
		f.Status = ""
	case model.TaskPending, model.TaskWaiting, model.TaskApproved, model.TaskRejected, model.TaskTransferred, model.TaskCancelled:
	default:
		return nil, "", model.CodedError(model.EINVALID, "invalid_status", "status must be one of pending, waiting, approved, rejected, transferred, cancelled, all")
	}
	return e.store.ListTasks(ctx, f)
}

// Bookmarks lists an instance's open waits: stored bookmarks (callbacks, messages, delays) and one per active
// approval node (resumed by deciding its tasks).
func (e *Engine) Bookmarks(ctx context.Context, actor *model.Principal, id string) ([]*model.Bookmark, error) {
	inst, _, err := e.readable(ctx, actor, id)
	if err != nil {
		return nil, err
	}
	bs, err := e.store.OpenBookmarks(ctx, actor.TenantID, id)
	if err != nil {
		return nil, err
	}
	if !systemPrincipal(actor) {
		for _, b := range bs {
			b.Payload = withoutSignedURL(b.Payload)
		}
	}
	for _, ns := range inst.State.Nodes {
		if ns.Type == model.NodeApproval && ns.Active() {
			bs = append(bs, &model.Bookmark{ID: ns.NodeInstanceID, InstanceID: id, NodeID: ns.NodeID, NodeInstanceID: ns.NodeInstanceID,
				Kind: model.BookmarkApproval, CorrelationID: inst.CorrelationID, Payload: json.RawMessage("{}"), CreatedAt: *ns.StartedAt})
		}
	}
	return bs, nil
}

// withoutSignedURL drops the callback URL from a bookmark's payload: it is a credential (anyone holding it
// resumes the wait), shown to admins and API tokens only.
func withoutSignedURL(payload json.RawMessage) json.RawMessage {
	if !gjson.GetBytes(payload, "callback_url").Exists() {
		return payload
	}
	out, err := sjson.DeleteBytes(payload, "callback_url")
	if err != nil {
		return json.RawMessage("{}")
	}
	return out
}

// ResumeBookmark resumes a wait by its id: a callback or message node takes data as its output, a delay ends
// early. 404 unknown, 409 already resumed (or timed out).
func (e *Engine) ResumeBookmark(ctx context.Context, actor *model.Principal, id string, data json.RawMessage) (*InstanceView, error) {
	if !systemPrincipal(actor) {
		return nil, errSystemWait
	}
	b, err := e.store.GetBookmark(ctx, actor.TenantID, id)
	if err != nil {
		if instID := instanceOf(id); instID != "" {
			// Approval waits have no row: they are resumed by deciding their tasks.
			if inst, _, gerr := e.store.GetInstance(ctx, actor.TenantID, instID); gerr == nil {
				for _, ns := range inst.State.Nodes {
					if ns.NodeInstanceID == id && ns.Type == model.NodeApproval {
						return nil, model.CodedError(model.ECONFLICT, "approval_bookmark", "an approval wait is resumed by deciding its tasks")
					}
				}
			}
		}
		return nil, err
	}
	return e.resume(ctx, actor, b.InstanceID, b.NodeInstanceID, data, "bookmark.resumed")
}

// errSystemWait refuses a user who tries to resume a system wait (a callback, a message, a delay), the initiator
// included: what the system would report (a payment, a check) is not theirs to forge.
var errSystemWait = model.CodedError(model.EFORBIDDEN, "not_allowed", "system waits are resumed by business systems (API tokens) and admins")

// Callback resumes a callback node through its URL. The token is the one the engine put in the URL; without it
// the caller must be an admin or an API token (a system wait is not the initiator's to resume).
func (e *Engine) Callback(ctx context.Context, actor *model.Principal, tenant, instanceID, nodeInstanceID, token string, body json.RawMessage) (*InstanceView, error) {
	signed := token != "" && hmac.Equal([]byte(token), []byte(CallbackToken(e.callbackKey, instanceID, nodeInstanceID)))
	if !signed && actor == nil {
		return nil, model.CodedError(model.EUNAUTHORIZED, "invalid_callback_token", "the callback token is missing or wrong")
	}
	if !signed && !systemPrincipal(actor) {
		return nil, errSystemWait
	}
	if instanceOf(nodeInstanceID) != instanceID {
		return nil, model.CodedError(model.ENOTFOUND, "callback_not_found", "no callback %s/%s", instanceID, nodeInstanceID)
	}
	if actor != nil {
		tenant = actor.TenantID
	}
	return e.resume(ctx, actor, instanceID, nodeInstanceID, body, "callback.received", tenant)
}

func (e *Engine) resume(ctx context.Context, actor *model.Principal, instID, nodeInstanceID string, data json.RawMessage, action string, tenant ...string) (*InstanceView, error) {
	tn := model.DefaultTenant
	if actor != nil {
		tn = actor.TenantID
	}
	if len(tenant) > 0 {
		tn = tenant[0]
	}
	who := "callback"
	if actor != nil {
		who = actor.Username
	}
	data = json.RawMessage(strings.TrimSpace(string(data)))
	if len(data) == 0 {
		data = json.RawMessage("{}")
	}
	if !json.Valid(data) {
		return nil, model.CodedError(model.EINVALID, "malformed_json", "the body must be JSON")
	}
	if err := model.CheckDocumentDepth("data", data); err != nil {
		return nil, err
	}
	w, err := e.update(ctx, "resume", tn, instID, who, func(s *step) error {
		var ns *model.NodeVisit
		for _, x := range s.inst.State.Nodes {
			if x.NodeInstanceID == nodeInstanceID {
				ns = x
			}
		}
		if ns == nil {
			// Unknown here; whether it ever existed is read after the transaction (a read here would need a
			// second pooled connection while this one holds the row lock).
			return errNoSuchWait
		}
		if !ns.Active() || s.inst.Ended() || (ns.WaitingFor != "callback" && ns.WaitingFor != "message" && ns.WaitingFor != "delay") {
			return model.CodedError(model.ECONFLICT, "already_resumed", "this wait is over: node %s is %s", ns.NodeID, ns.State)
		}
		return s.resumeWait(ns, data, action, nil)
	})
	if errors.Is(err, errNoSuchWait) {
		if _, gerr := e.store.GetBookmark(ctx, tn, nodeInstanceID); gerr != nil {
			return nil, model.CodedError(model.ENOTFOUND, "callback_not_found", "no wait %s in instance %s", nodeInstanceID, instID)
		}
		return nil, model.CodedError(model.ECONFLICT, "already_resumed", "this wait is over")
	}
	if err != nil {
		if errors.Is(err, model.ErrNoInstance) {
			return nil, model.CodedError(model.ENOTFOUND, "callback_not_found", "no instance %s", instID)
		}
		return nil, err
	}
	return e.view(w.Instance, nil, false), nil
}

var errStale = model.CodedError(model.ECONFLICT, "stale", "the wait is over")

// errNoSuchWait aborts a resume whose node visit is not in the instance; resume then answers 404 or 409.
var errNoSuchWait = errors.New("engine: no such wait in the instance")

// ListCC lists the instances the caller was copied on, newest first.
func (e *Engine) ListCC(ctx context.Context, actor *model.Principal, page model.Page) ([]*model.CCRecord, string, error) {
	return e.store.ListCC(ctx, actor.TenantID, actor.Username, page)
}

// MarkCCRead marks one of the caller's CC records read.
func (e *Engine) MarkCCRead(ctx context.Context, actor *model.Principal, id string) error {
	return e.store.MarkCCRead(ctx, actor.TenantID, actor.Username, id, e.clock.Now())
}

// StartedView returns an instance as its start answered it to a form's submitter (no signed URLs), without
// a reader's check: for the rebuilt answer of an anonymous form submit whose response was lost (the submitter
// holds the Idempotency-Key that committed it).
func (e *Engine) StartedView(ctx context.Context, tenant, id string) (*InstanceView, error) {
	inst, tasks, err := e.store.GetInstance(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	return e.view(inst, tasks, false), nil
}

// sortNodes orders node views by activation.
func sortNodes(ns []NodeView) {
	sort.SliceStable(ns, func(i, j int) bool { return ns[i].seq < ns[j].seq })
}
