package model

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Node types (API.md "Node types").
const (
	NodeStart     = "start"     // exactly one per template; carries the trigger
	NodeApproval  = "approval"  // human task
	NodeAuto      = "auto"      // runs its plugins, then passes on
	NodeDelay     = "delay"     // waits an interval or until a time
	NodeCallback  = "callback"  // waits for an external callback or a message
	NodeError     = "error"     // global error catcher, no incoming edges
	NodeEnd       = "end"       // normal end
	NodeTerminate = "terminate" // ends the instance at once
)

// Join modes: how a node with several incoming edges activates.
const (
	JoinAnd = "and" // every incoming edge taken (the default)
	JoinOr  = "or"  // the first incoming edge taken
)

// Sign modes of an approval node.
const (
	SignOr         = "or"         // 或签: the first decision decides (the default)
	SignAll        = "all"        // 会签: all must approve, any reject rejects
	SignSequential = "sequential" // 顺序会签: one after another
	SignVote       = "vote"       // 票签: passes when the approving share reaches pass_ratio
)

// Start trigger kinds.
const (
	TriggerManual   = "manual"
	TriggerCrontab  = "crontab"
	TriggerSyncAPI  = "sync-api"
	TriggerAsyncAPI = "async-api"
	TriggerForm     = "form"
)

// Login verification of an API trigger.
const (
	LoginNone     = "none"     // the default
	LoginToken    = "token"    // header X-Halley-Token
	LoginPassword = "password" // headers X-Halley-User and X-Halley-Password
)

// Error handler operations.
const (
	ErrorOpThrow  = "throw" // the default: to the error node if there is one, else the instance fails
	ErrorOpRetry  = "retry"
	ErrorOpIgnore = "ignore"
	ErrorOpCatch  = "catch"
)

// Actions of an approval node's on_timeout (the fourth form is a branch).
const (
	TimeoutApprove = "approve"
	TimeoutReject  = "reject"
	TimeoutRemind  = "remind"
)

// Relations an approvers object may name.
const (
	RelationInitiatorManager          = "initiator.manager"
	RelationInitiatorDepartmentLeader = "initiator.department.leader"
)

// Validation error codes (API.md "Validation error codes").
const (
	CodeBadDefinition  = "bad_definition" // not a JSON object, or its top level is malformed
	CodeNoStart        = "no_start"
	CodeMultipleStarts = "multiple_starts"
	CodeNoEnd          = "no_end"
	CodeCycle          = "cycle"
	CodeUnreachable    = "unreachable"
	CodeDeadEnd        = "dead_end"
	CodeUnknownNode    = "unknown_node"
	CodeDuplicateID    = "duplicate_id"
	CodeBadCondition   = "bad_condition"
	CodeBadCron        = "bad_cron"
	CodeBadNode        = "bad_node"
)

// Lengths the stores keep (in characters) for what a definition names: longer values are refused by validation
// (bad_node) instead of failing the step that writes them.
const (
	MaxNodeIDLen   = 128 // a node id (node_id columns)
	MaxNodeNameLen = 200 // a node name (tasks.node_name)
	MaxPersonLen   = 200 // a user name in approvers or cc (tasks.assignee, cc.username)
	MaxMessageLen  = 255 // a callback node's message name (bookmarks.message_name)
)

// KnownNodeType reports whether t is one of the node types.
func KnownNodeType(t string) bool {
	switch t {
	case NodeStart, NodeApproval, NodeAuto, NodeDelay, NodeCallback, NodeError, NodeEnd, NodeTerminate:
		return true
	}
	return false
}

// NodeTypeMessage is the message for a node whose type is missing or unknown, "" for a known type; parsing and
// validation share it.
func NodeTypeMessage(nodeID, nodeType string) string {
	switch {
	case nodeType == "":
		return fmt.Sprintf("node %q has no type", nodeID)
	case !KnownNodeType(nodeType):
		return fmt.Sprintf("node %q: unknown type %q (one of start, approval, auto, delay, callback, error, end, terminate)", nodeID, nodeType)
	}
	return ""
}

// ValidationError is one problem found in a definition: a code from the list above, a message for the template
// author, and the ids of the nodes at fault (in order for a cycle; never null in JSON).
type ValidationError struct {
	Code    string   `json:"code"`
	Message string   `json:"message"`
	Nodes   []string `json:"nodes"`
}

// NewValidationError builds a ValidationError; nodes may be empty.
func NewValidationError(code string, nodes []string, format string, args ...any) ValidationError {
	if nodes == nil {
		nodes = []string{}
	}
	return ValidationError{Code: code, Message: fmt.Sprintf(format, args...), Nodes: nodes}
}

func (e ValidationError) Error() string { return e.Code + ": " + e.Message }

// MarshalJSON keeps "nodes" an array even when the slice is nil, as clients index into it.
func (e ValidationError) MarshalJSON() ([]byte, error) {
	type plain ValidationError
	if e.Nodes == nil {
		e.Nodes = []string{}
	}
	return json.Marshal(plain(e))
}

// Duration is a time.Duration that reads a Go duration string ("2s", "1h30m"), "" or "0" as zero, a number of
// seconds (JSON number or numeric string, as Comet's delay interval), and writes a Go duration string.
type Duration time.Duration

// Std returns d as a time.Duration.
func (d Duration) Std() time.Duration { return time.Duration(d) }

func (d Duration) String() string { return time.Duration(d).String() }

// MarshalJSON writes d as a Go duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// UnmarshalJSON reads a duration string, a number of seconds or null (zero).
func (d *Duration) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return errors.New("empty duration")
	}
	switch b[0] {
	case 'n':
		if string(b) != "null" {
			return fmt.Errorf("invalid duration %s", b)
		}
		*d = 0
		return nil
	case '"':
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		v, err := ParseDuration(s)
		if err != nil {
			return err
		}
		*d = v
		return nil
	case 't', 'f', '[', '{':
		return fmt.Errorf("expected a duration string such as \"90s\" or a number of seconds, got %s", jsonKind(b))
	}
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return fmt.Errorf("invalid duration %s", b)
	}
	return d.setSeconds(f)
}

// ParseDuration parses the textual forms Duration accepts: a Go duration, a number of seconds, or ""/"0".
func ParseDuration(s string) (Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "0" {
		return 0, nil
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		var d Duration
		if err := d.setSeconds(f); err != nil {
			return 0, err
		}
		return d, nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("invalid duration %q: use a Go duration such as \"90s\" or \"1h30m\", or a number of seconds", s)
	}
	return Duration(v), nil
}

func (d *Duration) setSeconds(f float64) error {
	ns := f * float64(time.Second)
	if math.IsNaN(ns) || math.IsInf(ns, 0) || ns > math.MaxInt64 || ns < math.MinInt64 {
		return fmt.Errorf("duration of %v seconds is out of range", f)
	}
	*d = Duration(math.Round(ns))
	return nil
}

// OnTimeout is what an approval node does when its timeout passes: one of the actions TimeoutApprove,
// TimeoutReject, TimeoutRemind (JSON: the string), or taking a branch to another node (JSON: {"branch":"id"}).
type OnTimeout struct {
	Action string
	Branch string
}

// IsZero reports whether no on_timeout was given.
func (o OnTimeout) IsZero() bool { return o.Action == "" && o.Branch == "" }

// MarshalJSON writes the string form, or {"branch":...} for a branch.
func (o OnTimeout) MarshalJSON() ([]byte, error) {
	if o.Branch != "" {
		return json.Marshal(struct {
			Branch string `json:"branch"`
		}{o.Branch})
	}
	if o.Action == "" {
		return []byte("null"), nil
	}
	return json.Marshal(o.Action)
}

// UnmarshalJSON reads a string (the action; its value is checked by validation so that drafts still load) or an
// object with exactly one field, branch.
func (o *OnTimeout) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	*o = OnTimeout{}
	switch {
	case string(b) == "null":
		return nil
	case len(b) > 0 && b[0] == '"':
		return json.Unmarshal(b, &o.Action)
	case len(b) > 0 && b[0] == '{':
		var v struct {
			Branch string `json:"branch"`
		}
		if err := strictUnmarshal(b, &v); err != nil {
			return fmt.Errorf("on_timeout: %s", describeJSONError(err))
		}
		if v.Branch == "" {
			return errors.New(`on_timeout: {"branch": ...} needs a node id`)
		}
		o.Branch = v.Branch
		return nil
	}
	return fmt.Errorf(`on_timeout must be "approve", "reject", "remind" or {"branch":"node-id"}, got %s`, jsonKind(b))
}

// Plugins are the plugin names a node runs before it waits (pre) and after it finished (after).
type Plugins struct {
	Pre   []string `json:"pre,omitempty"`
	After []string `json:"after,omitempty"`
}

// Approvers says who decides an approval node (or who is copied, for cc). The ways may be combined, except
// groups and groups_context, which each stand alone.
type Approvers struct {
	Users         []string   `json:"users,omitempty"`
	Roles         []string   `json:"roles,omitempty"`
	Context       string     `json:"context,omitempty"`  // gjson path into the context: a user or a list of users
	Relation      string     `json:"relation,omitempty"` // RelationInitiatorManager or RelationInitiatorDepartmentLeader
	Groups        [][]string `json:"groups,omitempty"`   // 并签: one parallel sub-task set per group
	GroupsContext string     `json:"groups_context,omitempty"`
}

// IsZero reports whether no approver is named in any way.
func (a Approvers) IsZero() bool {
	return len(a.Users) == 0 && len(a.Roles) == 0 && a.Context == "" && a.Relation == "" &&
		len(a.Groups) == 0 && a.GroupsContext == ""
}

// HasGroups reports whether the approvers are groups (parallel sign), given inline or from the context.
func (a Approvers) HasGroups() bool { return len(a.Groups) > 0 || a.GroupsContext != "" }

// RetryPolicy is how often and how far apart a failing node is retried.
type RetryPolicy struct {
	Count  int      `json:"count,omitempty"`
	Period Duration `json:"period,omitzero"`
}

// CatchPolicy names the node taken when a node's error is caught.
type CatchPolicy struct {
	Branch string `json:"branch,omitempty"`
}

// ErrorHandler says what happens when a node's plugin or work fails (seed: errorHandler).
type ErrorHandler struct {
	Operation string      `json:"operation,omitempty"` // ErrorOp*; "" means throw
	Retry     RetryPolicy `json:"retry,omitzero"`
	Catch     CatchPolicy `json:"catch,omitzero"`
}

// Op returns the operation, defaulting to throw.
func (h ErrorHandler) Op() string {
	if h.Operation == "" {
		return ErrorOpThrow
	}
	return h.Operation
}

// Trigger is how instances of a template start. Which fields apply depends on Kind.
type Trigger struct {
	Kind string `json:"kind"`

	// crontab
	Expr          string `json:"expr,omitempty"`           // 5 fields: minute hour day-of-month month day-of-week
	AllowRepeated bool   `json:"allow_repeated,omitempty"` // start even while the previous instance still runs
	StartAt       string `json:"start_at,omitempty"`       // RFC 3339; "" = now
	EndAt         string `json:"end_at,omitempty"`         // RFC 3339; "" = never

	// sync-api and async-api
	Module            string `json:"module,omitempty"`
	Function          string `json:"function,omitempty"`
	Method            string `json:"method,omitempty"`             // HTTP method, default post
	LoginVerification string `json:"login_verification,omitempty"` // LoginNone (default), LoginToken, LoginPassword
	HeaderToken       string `json:"header_token,omitempty"`
	HeaderUser        string `json:"header_user,omitempty"`
	HeaderPassword    string `json:"header_password,omitempty"`
	AllowRemoteIPs    string `json:"allow_remote_ips,omitempty"` // comma-separated IPs and CIDRs; "" = anyone

	// form
	Form         json.RawMessage `json:"form,omitempty"`
	Members      []string        `json:"members,omitempty"`
	RequireLogin bool            `json:"require_login,omitempty"`
}

// IsZero reports whether no trigger was given.
func (t Trigger) IsZero() bool {
	return t.Kind == "" && t.Expr == "" && !t.AllowRepeated && t.StartAt == "" && t.EndAt == "" &&
		t.Module == "" && t.Function == "" && t.Method == "" && t.LoginVerification == "" &&
		t.HeaderToken == "" && t.HeaderUser == "" && t.HeaderPassword == "" && t.AllowRemoteIPs == "" &&
		len(t.Form) == 0 && len(t.Members) == 0 && !t.RequireLogin
}

// HTTPMethod returns the upper-case HTTP method of an API trigger, POST by default.
func (t Trigger) HTTPMethod() string {
	if t.Method == "" {
		return "POST"
	}
	return strings.ToUpper(t.Method)
}

// Login returns the login verification, LoginNone by default.
func (t Trigger) Login() string {
	if t.LoginVerification == "" {
		return LoginNone
	}
	return t.LoginVerification
}

// RemoteIPPrefixes parses AllowRemoteIPs; an empty result means every address is allowed. A bare IP becomes a
// single-address prefix.
func (t Trigger) RemoteIPPrefixes() ([]netip.Prefix, error) {
	var out []netip.Prefix
	for part := range strings.SplitSeq(t.AllowRemoteIPs, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		if strings.Contains(part, "/") {
			p, err := netip.ParsePrefix(part)
			if err != nil {
				return nil, fmt.Errorf("allow_remote_ips: %q is not an IP address or CIDR", part)
			}
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(part)
		if err != nil {
			return nil, fmt.Errorf("allow_remote_ips: %q is not an IP address or CIDR", part)
		}
		a = a.Unmap()
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}

// Window returns the crontab start_at and end_at times; a zero time means unbounded.
func (t Trigger) Window() (start, end time.Time, err error) {
	if t.StartAt != "" {
		if start, err = time.Parse(time.RFC3339, t.StartAt); err != nil {
			return time.Time{}, time.Time{}, fmt.Errorf("start_at %q is not an RFC 3339 time", t.StartAt)
		}
	}
	if t.EndAt != "" {
		if end, err = time.Parse(time.RFC3339, t.EndAt); err != nil {
			return time.Time{}, time.Time{}, fmt.Errorf("end_at %q is not an RFC 3339 time", t.EndAt)
		}
	}
	return start, end, nil
}

// Node is one step of a definition. The fields after CC apply to one node type each (see NodeFieldOwner).
type Node struct {
	ID           string       `json:"id"`
	Type         string       `json:"type"`
	Name         string       `json:"name,omitempty"`
	Join         string       `json:"join,omitempty"` // JoinAnd (default) or JoinOr
	Plugins      Plugins      `json:"plugins,omitzero"`
	Timeout      Duration     `json:"timeout,omitzero"` // 0 = none
	ErrorHandler ErrorHandler `json:"error_handler,omitzero"`
	IsIgnore     bool         `json:"is_ignore,omitempty"` // passed through without running
	CC           Approvers    `json:"cc,omitzero"`         // notified when the node activates (抄送)
	// Meta is free-form data for editors (positions, colours); the engine ignores it.
	Meta json.RawMessage `json:"meta,omitempty"`

	// start
	Trigger Trigger `json:"trigger,omitzero"`

	// approval
	Approvers Approvers       `json:"approvers,omitzero"`
	Sign      string          `json:"sign,omitempty"`       // Sign*; "" means or
	PassRatio float64         `json:"pass_ratio,omitempty"` // for vote: share of approvals that passes, in (0,1]
	GroupSign string          `json:"group_sign,omitempty"` // how each group decides; "" means or
	OnTimeout OnTimeout       `json:"on_timeout,omitzero"`
	Form      json.RawMessage `json:"form,omitempty"` // form template shown to the approver

	// delay
	Interval Duration `json:"interval,omitzero"`
	Until    string   `json:"until,omitempty"` // RFC 3339 time or a context path giving one

	// callback
	TimeoutBranch string `json:"timeout_branch,omitempty"`
	Message       string `json:"message,omitempty"`
}

// Label returns the node's name, or its id when it has none.
func (n *Node) Label() string {
	if n.Name != "" {
		return n.Name
	}
	return n.ID
}

// JoinMode returns the join mode, JoinAnd by default.
func (n *Node) JoinMode() string {
	if n.Join == "" {
		return JoinAnd
	}
	return n.Join
}

// SignMode returns the sign mode, SignOr by default.
func (n *Node) SignMode() string {
	if n.Sign == "" {
		return SignOr
	}
	return n.Sign
}

// GroupSignMode returns how each approver group decides, SignOr by default.
func (n *Node) GroupSignMode() string {
	if n.GroupSign == "" {
		return SignOr
	}
	return n.GroupSign
}

// NodeFieldOwner says which node type a JSON field of a node belongs to: "" for the fields common to every type;
// ok is false for a field no node has.
func NodeFieldOwner(field string) (owner string, ok bool) {
	switch field {
	case "id", "type", "name", "join", "plugins", "timeout", "error_handler", "is_ignore", "cc", "meta":
		return "", true
	case "trigger":
		return NodeStart, true
	case "approvers", "sign", "pass_ratio", "group_sign", "on_timeout", "form":
		return NodeApproval, true
	case "interval", "until":
		return NodeDelay, true
	case "timeout_branch", "message":
		return NodeCallback, true
	}
	return "", false
}

// ForeignFields lists the type-specific fields set (non-zero) on n that do not belong to its type, in JSON
// field order. Nodes of an unknown type have none.
func (n *Node) ForeignFields() []string {
	if !KnownNodeType(n.Type) {
		return nil
	}
	set := []struct {
		field string
		isSet bool
	}{
		{"trigger", !n.Trigger.IsZero()},
		{"approvers", !n.Approvers.IsZero()},
		{"sign", n.Sign != ""},
		{"pass_ratio", n.PassRatio != 0},
		{"group_sign", n.GroupSign != ""},
		{"on_timeout", !n.OnTimeout.IsZero()},
		{"form", len(n.Form) > 0},
		{"interval", n.Interval != 0},
		{"until", n.Until != ""},
		{"timeout_branch", n.TimeoutBranch != ""},
		{"message", n.Message != ""},
	}
	var out []string
	for _, f := range set {
		if owner, _ := NodeFieldOwner(f.field); f.isSet && owner != n.Type {
			out = append(out, f.field)
		}
	}
	return out
}

// ForeignFieldMessage is the message for a field set on a node of a type it does not belong to; parsing and
// validation share it so a problem found by both reads the same.
func ForeignFieldMessage(nodeID, nodeType, field string) string {
	owner, _ := NodeFieldOwner(field)
	return fmt.Sprintf("node %q: field %q does not apply to %s nodes (it belongs to %s nodes)", nodeID, field, nodeType, owner)
}

// TriggerFieldOwner says which trigger kinds a JSON field of a trigger belongs to: nil for "kind" (every kind);
// ok is false for a field no trigger has.
func TriggerFieldOwner(field string) (kinds []string, ok bool) {
	switch field {
	case "kind":
		return nil, true
	case "expr", "allow_repeated", "start_at", "end_at":
		return []string{TriggerCrontab}, true
	case "module", "function", "method", "login_verification", "header_token", "header_user", "header_password", "allow_remote_ips":
		return []string{TriggerSyncAPI, TriggerAsyncAPI}, true
	case "form", "members", "require_login":
		return []string{TriggerForm}, true
	}
	return nil, false
}

// KnownTriggerKind reports whether k is a trigger kind.
func KnownTriggerKind(k string) bool {
	switch k {
	case TriggerManual, TriggerCrontab, TriggerSyncAPI, TriggerAsyncAPI, TriggerForm:
		return true
	}
	return false
}

// ForeignFields lists the fields set (non-zero) on t that do not apply to its kind. Unknown kinds have none.
func (t Trigger) ForeignFields() []string {
	if !KnownTriggerKind(t.Kind) {
		return nil
	}
	set := []struct {
		field string
		isSet bool
	}{
		{"expr", t.Expr != ""}, {"allow_repeated", t.AllowRepeated}, {"start_at", t.StartAt != ""}, {"end_at", t.EndAt != ""},
		{"module", t.Module != ""}, {"function", t.Function != ""}, {"method", t.Method != ""},
		{"login_verification", t.LoginVerification != ""}, {"header_token", t.HeaderToken != ""},
		{"header_user", t.HeaderUser != ""}, {"header_password", t.HeaderPassword != ""}, {"allow_remote_ips", t.AllowRemoteIPs != ""},
		{"form", len(t.Form) > 0}, {"members", len(t.Members) > 0}, {"require_login", t.RequireLogin},
	}
	var out []string
	for _, f := range set {
		if kinds, _ := TriggerFieldOwner(f.field); f.isSet && !slices.Contains(kinds, t.Kind) {
			out = append(out, f.field)
		}
	}
	return out
}

// TriggerForeignFieldMessage is the message for a trigger field that does not apply to the trigger's kind.
func TriggerForeignFieldMessage(nodeID, kind, field string) string {
	kinds, _ := TriggerFieldOwner(field)
	return fmt.Sprintf("node %q: trigger field %q does not apply to a %s trigger (it belongs to %s)", nodeID, field, kind, strings.Join(kinds, "/"))
}

// Edge connects two nodes. Without a condition it is always taken; a default edge is taken only when no sibling
// edge (same From) is.
type Edge struct {
	ID        string          `json:"id,omitempty"`
	From      string          `json:"from"`
	To        string          `json:"to"`
	Condition json.RawMessage `json:"condition,omitempty"` // MongoDB-style query over the instance context
	Default   bool            `json:"default,omitempty"`
	Meta      json.RawMessage `json:"meta,omitempty"` // free-form data for editors; ignored by the engine
}

// HasCondition reports whether the edge carries a (non-null) condition.
func (e Edge) HasCondition() bool {
	c := bytes.TrimSpace(e.Condition)
	return len(c) > 0 && string(c) != "null"
}

// Label names the edge in messages: its id, or from → to.
func (e Edge) Label() string {
	if e.ID != "" {
		return fmt.Sprintf("edge %q (%s → %s)", e.ID, e.From, e.To)
	}
	return fmt.Sprintf("edge %s → %s", e.From, e.To)
}

// Definition is the graph of a process template: nodes and the edges between them.
//
// Lookups (Node, Outgoing, Incoming, Start, ErrorNode) use an index built by Index; ParseDefinition and
// json.Unmarshal build it. Build it before sharing a definition between goroutines; after that the lookups only
// read, and the nodes they return must not be changed. A definition changed after indexing (nodes or edges added
// or removed) falls back to linear scans until it is indexed again.
type Definition struct {
	Nodes   []Node          `json:"nodes"`
	Edges   []Edge          `json:"edges"`
	Options Options         `json:"options,omitzero"`
	Meta    json.RawMessage `json:"meta,omitempty"` // free-form data for editors; ignored by the engine

	idx *defIndex
}

// Options are the settings of a whole definition (the definition-level "options" object of API.md).
type Options struct {
	// Retention overrides HALLEY_INSTANCE_RETENTION for the instances of this version: once ended for this long
	// they are written to the archive and deleted from the database; "0" keeps them forever. Absent: the
	// deployment's setting applies. A Go duration ("720h") or a number of seconds; never negative.
	Retention *Duration `json:"retention,omitempty"`
}

// optionNames are the keys an options object may have.
var optionNames = []string{"retention"}

// parseOptions reads the options object strictly; ok is false (with the reason) when it is not an object, has an
// unknown key, or a value of the wrong kind.
func parseOptions(raw json.RawMessage) (Options, string) {
	var o Options
	if isNull(raw) {
		return o, ""
	}
	if t := bytes.TrimSpace(raw); t[0] != '{' {
		return o, fmt.Sprintf("options must be an object, got %s", jsonKind(t))
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return o, "options must be an object: " + describeJSONError(err)
	}
	for _, k := range sortedKeys(foldFields(fields, optionNames)) {
		v := fields[k]
		switch k {
		case "retention":
			if isNull(v) {
				continue
			}
			var d Duration
			if err := json.Unmarshal(v, &d); err != nil {
				return Options{}, fmt.Sprintf("options.retention: %v", err)
			}
			if d < 0 {
				return Options{}, "options.retention must not be negative (0 keeps instances forever)"
			}
			o.Retention = &d
		default:
			return Options{}, fmt.Sprintf("unknown option %q (options has %s)", k, strings.Join(optionNames, ", "))
		}
	}
	return o, ""
}

type defIndex struct {
	nodes, edges int // lengths when built: a mismatch means the index is stale
	byID         map[string]int
	out, in      map[string][]int32
	start, errNd int // first start and error node, -1 when none
}

// Index builds the lookup index and returns d. Call it after building or changing a definition in code and
// before sharing it.
func (d *Definition) Index() *Definition {
	ix := &defIndex{
		nodes: len(d.Nodes), edges: len(d.Edges),
		byID:  make(map[string]int, len(d.Nodes)),
		out:   make(map[string][]int32, len(d.Nodes)),
		in:    make(map[string][]int32, len(d.Nodes)),
		start: -1, errNd: -1,
	}
	for i := range d.Nodes {
		n := &d.Nodes[i]
		if _, dup := ix.byID[n.ID]; !dup {
			ix.byID[n.ID] = i
		}
		switch {
		case n.Type == NodeStart && ix.start < 0:
			ix.start = i
		case n.Type == NodeError && ix.errNd < 0:
			ix.errNd = i
		}
	}
	for i, e := range d.Edges {
		ix.out[e.From] = append(ix.out[e.From], int32(i))
		ix.in[e.To] = append(ix.in[e.To], int32(i))
	}
	d.idx = ix
	return d
}

func (d *Definition) index() *defIndex {
	if ix := d.idx; ix != nil && ix.nodes == len(d.Nodes) && ix.edges == len(d.Edges) {
		return ix
	}
	return nil
}

// MarshalJSON writes nodes and edges as arrays even when they are nil.
func (d Definition) MarshalJSON() ([]byte, error) {
	type plain Definition
	if d.Nodes == nil {
		d.Nodes = []Node{}
	}
	if d.Edges == nil {
		d.Edges = []Edge{}
	}
	return json.Marshal(plain(d))
}

// UnmarshalJSON decodes leniently (stored definitions, drafts) and builds the index. Use ParseDefinition to
// decode a definition from a user strictly.
func (d *Definition) UnmarshalJSON(b []byte) error {
	type plain Definition
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*d = Definition(p)
	d.Index()
	return nil
}

// Node returns the node with the id (the first one if ids repeat), or nil.
func (d *Definition) Node(id string) *Node {
	if ix := d.index(); ix != nil {
		if i, ok := ix.byID[id]; ok {
			return &d.Nodes[i]
		}
		return nil
	}
	for i := range d.Nodes {
		if d.Nodes[i].ID == id {
			return &d.Nodes[i]
		}
	}
	return nil
}

// Outgoing returns the edges leaving the node, in definition order. The slice is the caller's.
func (d *Definition) Outgoing(id string) []Edge {
	return d.edgesAt(func(ix *defIndex) []int32 { return ix.out[id] }, func(e *Edge) bool { return e.From == id })
}

// Incoming returns the edges entering the node, in definition order. The slice is the caller's.
func (d *Definition) Incoming(id string) []Edge {
	return d.edgesAt(func(ix *defIndex) []int32 { return ix.in[id] }, func(e *Edge) bool { return e.To == id })
}

func (d *Definition) edgesAt(indexed func(*defIndex) []int32, match func(*Edge) bool) []Edge {
	if ix := d.index(); ix != nil {
		is := indexed(ix)
		if len(is) == 0 {
			return nil
		}
		out := make([]Edge, len(is))
		for k, i := range is {
			out[k] = d.Edges[i]
		}
		return out
	}
	var out []Edge
	for i := range d.Edges {
		if match(&d.Edges[i]) {
			out = append(out, d.Edges[i])
		}
	}
	return out
}

// Start returns the (first) start node, or nil.
func (d *Definition) Start() *Node {
	return d.firstOfType(NodeStart, func(ix *defIndex) int { return ix.start })
}

// ErrorNode returns the (first) error node, or nil when the template has none.
func (d *Definition) ErrorNode() *Node {
	return d.firstOfType(NodeError, func(ix *defIndex) int { return ix.errNd })
}

func (d *Definition) firstOfType(t string, indexed func(*defIndex) int) *Node {
	if ix := d.index(); ix != nil {
		if i := indexed(ix); i >= 0 {
			return &d.Nodes[i]
		}
		return nil
	}
	for i := range d.Nodes {
		if d.Nodes[i].Type == t {
			return &d.Nodes[i]
		}
	}
	return nil
}

// ParseDefinition decodes a definition strictly: the definition must be a JSON object; unknown node types,
// unknown fields anywhere (definition, node, edge, trigger, approvers, error handler...), fields of the wrong JSON
// type and fields that belong to another node type or trigger kind are reported, each naming its node, and the
// offending field is left out of the result. A field set to null counts as absent. Field names match as
// encoding/json matches them (case-insensitively).
//
// The definition is returned (indexed) whenever its top level is usable, so that graph validation can go on
// and report everything at once; it is nil only when it is not. ParseDefinition checks the shape only:
// ValidateDefinition in service/graph checks the meaning.
func ParseDefinition(raw []byte) (*Definition, []ValidationError) {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return nil, []ValidationError{NewValidationError(CodeBadDefinition, nil, "the definition must be a JSON object with nodes and edges, got %s", jsonKind(trimmed))}
	}
	// Most definitions are well-formed, and one strict decoding pass reads those. Only when it meets a problem
	// does the field-by-field pass run, which reports every problem and keeps what is usable.
	if d, ok := parseClean(trimmed); ok {
		return d.Index(), nil
	}
	return parseEach(trimmed)
}

// wireDefinition is the JSON shape of a definition with a pointer per type-specific field, so that a field's
// presence is known.
type wireDefinition struct {
	Nodes   []wireNode      `json:"nodes"`
	Edges   []Edge          `json:"edges"`
	Options json.RawMessage `json:"options"`
	Meta    json.RawMessage `json:"meta"`
}

type wireNode struct {
	Node // the common fields; the type-specific fields below shadow Node's

	Trigger       *wireTrigger    `json:"trigger"`
	Approvers     *Approvers      `json:"approvers"`
	Sign          *string         `json:"sign"`
	PassRatio     *float64        `json:"pass_ratio"`
	GroupSign     *string         `json:"group_sign"`
	OnTimeout     *OnTimeout      `json:"on_timeout"`
	Form          json.RawMessage `json:"form"`
	Interval      *Duration       `json:"interval"`
	Until         *string         `json:"until"`
	TimeoutBranch *string         `json:"timeout_branch"`
	Message       *string         `json:"message"`
}

type wireTrigger struct {
	Kind              *string         `json:"kind"`
	Expr              *string         `json:"expr"`
	AllowRepeated     *bool           `json:"allow_repeated"`
	StartAt           *string         `json:"start_at"`
	EndAt             *string         `json:"end_at"`
	Module            *string         `json:"module"`
	Function          *string         `json:"function"`
	Method            *string         `json:"method"`
	LoginVerification *string         `json:"login_verification"`
	HeaderToken       *string         `json:"header_token"`
	HeaderUser        *string         `json:"header_user"`
	HeaderPassword    *string         `json:"header_password"`
	AllowRemoteIPs    *string         `json:"allow_remote_ips"`
	Form              json.RawMessage `json:"form"`
	Members           *[]string       `json:"members"`
	RequireLogin      *bool           `json:"require_login"`
}

// parseClean reads a definition in one strict pass. It reports false at the first problem of any kind, and
// then parseEach reads it again to say what is wrong; so when it reports true, parseEach would have found no
// problem and built the same definition.
func parseClean(b []byte) (*Definition, bool) {
	var w wireDefinition
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil || dec.InputOffset() != int64(len(b)) || !isNullOrObject(w.Meta) {
		return nil, false
	}
	opts, bad := parseOptions(w.Options)
	if bad != "" {
		return nil, false
	}
	d := &Definition{Meta: nonNull(w.Meta), Nodes: make([]Node, len(w.Nodes)), Edges: w.Edges, Options: opts}
	if d.Edges == nil {
		d.Edges = []Edge{}
	}
	for i := range w.Nodes {
		n, ok := w.Nodes[i].node()
		if !ok {
			return nil, false
		}
		d.Nodes[i] = n
	}
	for i := range d.Edges {
		e := &d.Edges[i]
		// An edge without from or to may be a null in the array, which parseEach reports.
		if e.From == "" || e.To == "" || !isNullOrObject(e.Meta) {
			return nil, false
		}
		e.Condition, e.Meta = nonNull(e.Condition), nonNull(e.Meta)
	}
	return d, true
}

func (w *wireNode) node() (Node, bool) {
	n := w.Node
	// A node without a type may be a null in the array, which parseEach reports.
	if !KnownNodeType(n.Type) || !isNullOrObject(n.Meta) {
		return n, false
	}
	n.Meta = nonNull(n.Meta)
	form := nonNull(w.Form)
	isStart, isApproval, isDelay, isCallback := n.Type == NodeStart, n.Type == NodeApproval, n.Type == NodeDelay, n.Type == NodeCallback
	switch {
	case !isStart && w.Trigger != nil,
		!isApproval && (w.Approvers != nil || w.Sign != nil || w.PassRatio != nil || w.GroupSign != nil || w.OnTimeout != nil || form != nil),
		!isDelay && (w.Interval != nil || w.Until != nil),
		!isCallback && (w.TimeoutBranch != nil || w.Message != nil):
		return n, false
	}
	if w.Trigger != nil {
		t, ok := w.Trigger.trigger()
		if !ok {
			return n, false
		}
		n.Trigger = t
	}
	n.Approvers, n.Sign, n.PassRatio, n.GroupSign = deref(w.Approvers), deref(w.Sign), deref(w.PassRatio), deref(w.GroupSign)
	n.OnTimeout, n.Form = deref(w.OnTimeout), form
	n.Interval, n.Until = deref(w.Interval), deref(w.Until)
	n.TimeoutBranch, n.Message = deref(w.TimeoutBranch), deref(w.Message)
	return n, true
}

func (w *wireTrigger) trigger() (Trigger, bool) {
	t := Trigger{Kind: deref(w.Kind)}
	form := nonNull(w.Form)
	known := KnownTriggerKind(t.Kind) // fields of a trigger of unknown kind are kept; validation reports the kind
	cron := !known || t.Kind == TriggerCrontab
	api := !known || t.Kind == TriggerSyncAPI || t.Kind == TriggerAsyncAPI
	isForm := !known || t.Kind == TriggerForm
	switch {
	case !cron && (w.Expr != nil || w.AllowRepeated != nil || w.StartAt != nil || w.EndAt != nil),
		!api && (w.Module != nil || w.Function != nil || w.Method != nil || w.LoginVerification != nil ||
			w.HeaderToken != nil || w.HeaderUser != nil || w.HeaderPassword != nil || w.AllowRemoteIPs != nil),
		!isForm && (form != nil || w.Members != nil || w.RequireLogin != nil):
		return t, false
	}
	t.Expr, t.AllowRepeated, t.StartAt, t.EndAt = deref(w.Expr), deref(w.AllowRepeated), deref(w.StartAt), deref(w.EndAt)
	t.Module, t.Function, t.Method = deref(w.Module), deref(w.Function), deref(w.Method)
	t.LoginVerification, t.HeaderToken, t.HeaderUser = deref(w.LoginVerification), deref(w.HeaderToken), deref(w.HeaderUser)
	t.HeaderPassword, t.AllowRemoteIPs = deref(w.HeaderPassword), deref(w.AllowRemoteIPs)
	t.Form, t.Members, t.RequireLogin = form, deref(w.Members), deref(w.RequireLogin)
	return t, true
}

func deref[T any](p *T) T {
	if p == nil {
		var zero T
		return zero
	}
	return *p
}

// nonNull returns nil for an absent or null raw value.
func nonNull(v json.RawMessage) json.RawMessage {
	if isNull(v) {
		return nil
	}
	return v
}

func isNull(v json.RawMessage) bool {
	v = bytes.TrimSpace(v)
	return len(v) == 0 || string(v) == "null"
}

// foldKey returns the name among names that key matches, exactly or as encoding/json matches field names
// (ignoring case), or "" when none does.
func foldKey(key string, names ...string) string {
	for _, n := range names {
		if n == key {
			return n
		}
	}
	for _, n := range names {
		if strings.EqualFold(n, key) {
			return n
		}
	}
	return ""
}

func nodeFieldNames() []string {
	return []string{"id", "type", "name", "join", "plugins", "timeout", "error_handler", "is_ignore", "cc", "meta",
		"trigger", "approvers", "sign", "pass_ratio", "group_sign", "on_timeout", "form", "interval", "until",
		"timeout_branch", "message"}
}

func triggerFieldNames() []string {
	return []string{"kind", "expr", "allow_repeated", "start_at", "end_at", "module", "function", "method",
		"login_verification", "header_token", "header_user", "header_password", "allow_remote_ips", "form",
		"members", "require_login"}
}

// foldFields renames the keys of fields to the names they match; unknown keys are kept as they are.
func foldFields(fields map[string]json.RawMessage, names []string) map[string]json.RawMessage {
	for k, v := range fields {
		if c := foldKey(k, names...); c != "" && c != k {
			delete(fields, k)
			fields[c] = v
		}
	}
	return fields
}

// parseEach reads a definition field by field, reporting every problem.
func parseEach(trimmed []byte) (*Definition, []ValidationError) {
	var errs []ValidationError
	bad := func(code string, nodes []string, format string, args ...any) {
		errs = append(errs, NewValidationError(code, nodes, format, args...))
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(trimmed, &top); err != nil {
		bad(CodeBadDefinition, nil, "the definition is not valid JSON: %s", describeJSONError(err))
		return nil, errs
	}
	foldFields(top, []string{"nodes", "edges", "options", "meta"})
	var rawNodes, rawEdges []json.RawMessage
	d := &Definition{}
	usable := true
	for _, k := range sortedKeys(top) {
		v := top[k]
		switch k {
		case "nodes", "edges":
			dst := &rawNodes
			if k == "edges" {
				dst = &rawEdges
			}
			if err := json.Unmarshal(v, dst); err != nil {
				bad(CodeBadDefinition, nil, "%s must be an array of objects, got %s", k, jsonKind(v))
				usable = false
			}
		case "meta":
			if !isNullOrObject(v) {
				bad(CodeBadDefinition, nil, "meta must be an object, got %s", jsonKind(v))
				continue
			}
			d.Meta = nonNull(v)
		case "options":
			opts, why := parseOptions(v)
			if why != "" {
				bad(CodeBadDefinition, nil, "%s", why)
				continue
			}
			d.Options = opts
		default:
			bad(CodeBadDefinition, nil, "unknown field %q in the definition (it has nodes, edges, options and meta)", k)
		}
	}
	if !usable {
		return nil, errs
	}
	d.Nodes = make([]Node, 0, len(rawNodes))
	for i, rn := range rawNodes {
		n, ok, nerrs := parseNode(i, rn)
		errs = append(errs, nerrs...)
		if ok {
			d.Nodes = append(d.Nodes, n)
		}
	}
	d.Edges = make([]Edge, 0, len(rawEdges))
	for i, re := range rawEdges {
		e, ok, eerrs := parseEdge(i, re)
		errs = append(errs, eerrs...)
		if ok {
			d.Edges = append(d.Edges, e)
		}
	}
	return d.Index(), errs
}

func parseNode(i int, raw json.RawMessage) (Node, bool, []ValidationError) {
	var n Node
	var errs []ValidationError
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		errs = append(errs, NewValidationError(CodeBadNode, nil, "node #%d must be a JSON object, got %s", i+1, jsonKind(raw)))
		return n, false, errs
	}
	foldFields(fields, nodeFieldNames())
	if v, ok := fields["id"]; ok {
		if err := decodeValue(v, &n.ID); err != nil {
			errs = append(errs, NewValidationError(CodeBadNode, nil, "node #%d: id must be a string, got %s", i+1, jsonKind(v)))
			return n, false, errs
		}
	}
	at := func() []string {
		if n.ID == "" {
			return nil
		}
		return []string{n.ID}
	}
	name := n.ID
	if name == "" {
		name = fmt.Sprintf("#%d", i+1)
	}
	bad := func(format string, args ...any) {
		errs = append(errs, NewValidationError(CodeBadNode, at(), format, args...))
	}
	if v, ok := fields["type"]; ok && decodeValue(v, &n.Type) != nil {
		bad("node %q: type must be a string, got %s", name, jsonKind(v))
	} else if msg := NodeTypeMessage(name, n.Type); msg != "" {
		bad("%s", msg)
	}
	for _, k := range sortedKeys(fields) {
		if k == "id" || k == "type" {
			continue
		}
		owner, known := NodeFieldOwner(k)
		switch {
		case !known:
			bad("node %q: unknown field %q", name, k)
			continue
		case isNull(fields[k]):
			continue
		case owner != "" && KnownNodeType(n.Type) && owner != n.Type:
			bad("%s", ForeignFieldMessage(name, n.Type, k))
			continue
		}
		if k == "trigger" {
			for _, msg := range decodeTrigger(name, fields[k], &n.Trigger) {
				bad("%s", msg)
			}
			continue
		}
		if err := n.decodeField(k, fields[k]); err != nil {
			bad("node %q: field %s", name, fieldError(k, err))
		}
	}
	return n, true, errs
}

// decodeField decodes one JSON field of a node into its struct field, strictly.
func (n *Node) decodeField(k string, v json.RawMessage) error {
	var dst any
	switch k {
	case "name":
		dst = &n.Name
	case "join":
		dst = &n.Join
	case "plugins":
		dst = &n.Plugins
	case "timeout":
		dst = &n.Timeout
	case "error_handler":
		dst = &n.ErrorHandler
	case "is_ignore":
		dst = &n.IsIgnore
	case "cc":
		dst = &n.CC
	case "meta":
		if !isNullOrObject(v) {
			return fmt.Errorf("expected an object, got %s", jsonKind(v))
		}
		n.Meta = nonNull(v)
		return nil
	case "approvers":
		dst = &n.Approvers
	case "sign":
		dst = &n.Sign
	case "pass_ratio":
		dst = &n.PassRatio
	case "group_sign":
		dst = &n.GroupSign
	case "on_timeout":
		dst = &n.OnTimeout
	case "form":
		n.Form = nonNull(v)
		return nil
	case "interval":
		dst = &n.Interval
	case "until":
		dst = &n.Until
	case "timeout_branch":
		dst = &n.TimeoutBranch
	case "message":
		dst = &n.Message
	default:
		return errors.New("unknown field")
	}
	return decodeValue(v, dst)
}

func decodeTrigger(nodeName string, raw json.RawMessage, t *Trigger) []string {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return []string{fmt.Sprintf("node %q: field \"trigger\": expected an object, got %s", nodeName, jsonKind(raw))}
	}
	foldFields(fields, triggerFieldNames())
	var msgs []string
	if v, ok := fields["kind"]; ok {
		if err := decodeValue(v, &t.Kind); err != nil {
			msgs = append(msgs, fmt.Sprintf("node %q: field \"trigger.kind\": expected a string, got %s", nodeName, jsonKind(v)))
		}
	}
	for _, k := range sortedKeys(fields) {
		if k == "kind" {
			continue
		}
		kinds, known := TriggerFieldOwner(k)
		switch {
		case !known:
			msgs = append(msgs, fmt.Sprintf("node %q: trigger: unknown field %q", nodeName, k))
			continue
		case isNull(fields[k]):
			continue
		case KnownTriggerKind(t.Kind) && !slices.Contains(kinds, t.Kind):
			msgs = append(msgs, TriggerForeignFieldMessage(nodeName, t.Kind, k))
			continue
		}
		if err := t.decodeField(k, fields[k]); err != nil {
			msgs = append(msgs, fmt.Sprintf("node %q: field %s", nodeName, fieldError("trigger."+k, err)))
		}
	}
	return msgs
}

func (t *Trigger) decodeField(k string, v json.RawMessage) error {
	var dst any
	switch k {
	case "expr":
		dst = &t.Expr
	case "allow_repeated":
		dst = &t.AllowRepeated
	case "start_at":
		dst = &t.StartAt
	case "end_at":
		dst = &t.EndAt
	case "module":
		dst = &t.Module
	case "function":
		dst = &t.Function
	case "method":
		dst = &t.Method
	case "login_verification":
		dst = &t.LoginVerification
	case "header_token":
		dst = &t.HeaderToken
	case "header_user":
		dst = &t.HeaderUser
	case "header_password":
		dst = &t.HeaderPassword
	case "allow_remote_ips":
		dst = &t.AllowRemoteIPs
	case "form":
		t.Form = nonNull(v)
		return nil
	case "members":
		dst = &t.Members
	case "require_login":
		dst = &t.RequireLogin
	default:
		return errors.New("unknown field")
	}
	return decodeValue(v, dst)
}

func parseEdge(i int, raw json.RawMessage) (Edge, bool, []ValidationError) {
	var e Edge
	var errs []ValidationError
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		errs = append(errs, NewValidationError(CodeBadNode, nil, "edge #%d must be a JSON object, got %s", i+1, jsonKind(raw)))
		return e, false, errs
	}
	foldFields(fields, []string{"id", "from", "to", "condition", "default", "meta"})
	// from and to first, so that every other message can name the edge's nodes.
	for _, k := range []string{"from", "to", "id"} {
		v, ok := fields[k]
		if !ok {
			continue
		}
		dst := &e.ID
		switch k {
		case "from":
			dst = &e.From
		case "to":
			dst = &e.To
		}
		if err := decodeValue(v, dst); err != nil {
			errs = append(errs, NewValidationError(CodeBadNode, nil, "edge #%d: %s must be a string, got %s", i+1, k, jsonKind(v)))
			return e, false, errs
		}
	}
	var at []string
	for _, id := range []string{e.From, e.To} {
		if id != "" && !slices.Contains(at, id) {
			at = append(at, id)
		}
	}
	label := fmt.Sprintf("edge #%d (%s → %s)", i+1, e.From, e.To)
	if e.ID != "" {
		label = fmt.Sprintf("edge %q (%s → %s)", e.ID, e.From, e.To)
	}
	for _, k := range sortedKeys(fields) {
		v := fields[k]
		var err error
		switch k {
		case "from", "to", "id":
			continue
		case "condition":
			e.Condition = nonNull(v)
		case "default":
			if !isNull(v) {
				err = decodeValue(v, &e.Default)
			}
		case "meta":
			if !isNullOrObject(v) {
				err = fmt.Errorf("expected an object, got %s", jsonKind(v))
			} else {
				e.Meta = nonNull(v)
			}
		default:
			errs = append(errs, NewValidationError(CodeBadNode, at, "%s: unknown field %q (an edge has id, from, to, condition, default and meta)", label, k))
			continue
		}
		if err != nil {
			errs = append(errs, NewValidationError(CodeBadNode, at, "%s: field %s", label, fieldError(k, err)))
		}
	}
	return e, true, errs
}

// decodeValue decodes one field value: plain strings and booleans directly (most fields are those, and a
// template may have thousands of nodes), everything else with strictUnmarshal.
func decodeValue(v json.RawMessage, dst any) error {
	switch d := dst.(type) {
	case *string:
		if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' && bytes.IndexByte(v, '\\') < 0 && !bytes.ContainsFunc(v[1:len(v)-1], func(r rune) bool { return r < 0x20 || r == '"' || r == utf8.RuneError }) {
			*d = string(v[1 : len(v)-1])
			return nil
		}
	case *bool:
		switch string(v) {
		case "true":
			*d = true
			return nil
		case "false":
			*d = false
			return nil
		}
	}
	return strictUnmarshal(v, dst)
}

// strictUnmarshal decodes one JSON value, refusing unknown object fields at every depth.
func strictUnmarshal(v json.RawMessage, dst any) error {
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.DisallowUnknownFields()
	return dec.Decode(dst)
}

// fieldError renders a decoding error of field k as `"k.sub": problem`.
func fieldError(k string, err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		path := k
		if te.Field != "" {
			path = k + "." + te.Field
		}
		return fmt.Sprintf("%q: expected %s, got %s", path, jsonTypeName(te.Type), te.Value)
	}
	return fmt.Sprintf("%q: %s", k, describeJSONError(err))
}

func describeJSONError(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field != "" {
			return fmt.Sprintf("%s: expected %s, got %s", te.Field, jsonTypeName(te.Type), te.Value)
		}
		return fmt.Sprintf("expected %s, got %s", jsonTypeName(te.Type), te.Value)
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}

func jsonTypeName(t reflect.Type) string {
	if t == nil {
		return "another type"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Struct, reflect.Map:
		return "an object"
	}
	return t.String()
}

// jsonKind names the JSON kind of a raw value for messages.
func jsonKind(b []byte) string {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return "nothing"
	}
	switch b[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// isNullOrObject reports whether v is absent, null or an object.
func isNullOrObject(v json.RawMessage) bool {
	v = bytes.TrimSpace(v)
	return len(v) == 0 || v[0] == '{' || string(v) == "null"
}

func sortedKeys(m map[string]json.RawMessage) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
