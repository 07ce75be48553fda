package model

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"reflect"
	"strconv"
	"strings"
	"time"
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
	// NodeSubprocess starts child instances of another template and waits for them (model/subprocess.go).
	NodeSubprocess = "subprocess"
)

// Join modes: how a node with several incoming edges activates (API.md "Semantics changes"). Every incoming
// edge ends up taken, pruned (routing did not choose it) or killed (a rejection or failure upstream).
const (
	JoinAnd = "and" // the default: every incoming edge taken or pruned, at least one taken (synchronizing merge)
	JoinOr  = "or"  // the first taken incoming edge; later arrivals are absorbed
	JoinMin = "min" // {"min":N}: N taken incoming edges (partial join)
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
	TriggerMessage  = "message" // 消息开始: POST /messages with the trigger's message name starts an instance
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
	RelationInitiatorManagers         = "initiator.managers" // the manager chain (levels, until_role)
)

// MaxManagerLevels bounds approvers.levels of a manager chain.
const MaxManagerLevels = 20

// Role scopes of approvers.scope.
const (
	ScopeTenant                  = "tenant"
	ScopeInitiatorDepartment     = "initiator.department"
	ScopeInitiatorDepartmentTree = "initiator.department_tree"
)

// What an approval node does when nobody is left to decide it (on_no_approver).
const (
	NoApproverError  = "error"
	NoApproverPass   = "pass"
	NoApproverReject = "reject"
	NoApproverAdmins = "admins"
)

// options.self_approval: what happens when the initiator is an approver.
const (
	SelfApprovalAllow   = "allow"
	SelfApprovalPass    = "pass"
	SelfApprovalManager = "manager"
)

// options.dedupe: approvers decided automatically because they approved before.
const (
	DedupeNone        = "none"
	DedupeConsecutive = "consecutive"
	DedupeAny         = "any"
)

// Reasons of an automatic decision (task.auto_approved / task.auto_rejected data.reason).
const (
	AutoNoApprover   = "no_approver"
	AutoSelfApproval = "self_approval"
	AutoDedupe       = "dedupe"
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
	// CodeBadTitlePattern: a title pattern that does not parse, or names a placeholder that can hold nothing.
	CodeBadTitlePattern = "bad_title_pattern"

	// CodeUnknownUser is a warning, not an error: a static approver or cc user that does not exist (yet).
	CodeUnknownUser = "unknown_user"
)

// Lengths the stores keep (in characters) for what a definition names: longer values are refused by validation
// (bad_node) instead of failing the step that writes them.
const (
	MaxNodeIDLen   = 128 // a node id (node_id columns)
	MaxNodeNameLen = 200 // a node name (tasks.node_name)
	MaxPersonLen   = 200 // a user name in approvers or cc (tasks.assignee, cc.username)
	MaxMessageLen  = 255 // a callback node's message name (bookmarks.message_name)
)

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

// DurationFormat is the JSON Schema "format" of a Duration in the definition schema; service/graph checks it with
// Duration's own decoder.
const DurationFormat = "go-duration"

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

// Join is how a node with several incoming edges activates: "and" (the default), "or" (JSON: the string), or
// {"min":N} — N taken incoming edges (JSON: the object). CancelRest ({"min":N,"cancel_rest":true}) cancels the
// branches still running that can only lead into the node once it activated (engine/cancelrest.go).
type Join struct {
	Mode       string // JoinAnd, JoinOr or JoinMin; "" means JoinAnd
	Min        int    // with JoinMin: how many taken incoming edges activate the node
	CancelRest bool
}

// IsZero reports whether no join was given.
func (j Join) IsZero() bool { return j.Mode == "" && j.Min == 0 && !j.CancelRest }

// String names the join for messages: and, or, min 2.
func (j Join) String() string {
	if j.Mode == JoinMin {
		return fmt.Sprintf("min %d", j.Min)
	}
	if j.Mode == "" {
		return JoinAnd
	}
	return j.Mode
}

// MarshalJSON writes the string form, or {"min":N} for a partial join.
func (j Join) MarshalJSON() ([]byte, error) {
	if j.Mode == JoinMin {
		return json.Marshal(struct {
			Min        int  `json:"min"`
			CancelRest bool `json:"cancel_rest,omitempty"`
		}{j.Min, j.CancelRest})
	}
	if j.Mode == "" {
		return []byte("null"), nil
	}
	return json.Marshal(j.Mode)
}

// UnmarshalJSON reads a string (the mode; its value is checked by validation so that drafts still load) or an
// object {"min":N} with an optional cancel_rest.
func (j *Join) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	*j = Join{}
	switch {
	case string(b) == "null":
		return nil
	case len(b) > 0 && b[0] == '"':
		return json.Unmarshal(b, &j.Mode)
	case len(b) > 0 && b[0] == '{':
		var v struct {
			Min        *int  `json:"min"`
			CancelRest *bool `json:"cancel_rest"`
		}
		if err := strictUnmarshal(b, &v); err != nil {
			return fmt.Errorf("join: %s", describeJSONError(err))
		}
		if v.Min == nil {
			return errors.New(`join: {"min": N} needs N, the number of taken incoming edges that activate the node`)
		}
		j.Mode, j.Min, j.CancelRest = JoinMin, *v.Min, deref(v.CancelRest)
		return nil
	}
	return fmt.Errorf(`join must be "and", "or" or {"min": N}, got %s`, jsonKind(b))
}

// The types below are the definition's JSON shape, and the source of its JSON Schema
// (model/definition.schema.json, served at GET /api/v1/schemas/definition.json; `make generate` regenerates it
// with service/graph/schemagen, and the front end's types are generated from it). So they say everything about a
// field in one place:
//
//   - the json tag names it;
//   - the `jsonschema` tag constrains it (required, enum, minLength, maxLength, pattern, minimum, maximum...);
//   - the `jsonschema_extras` tag says which node types (or trigger kinds, or error-handler operations) it belongs
//     to: "x-discriminator" marks the field whose value decides (a node's type), "x-for" lists the values a field
//     belongs to (a field without it belongs to all), "x-required-for" the values that need it; "x-code" is the
//     validation code its problems carry (bad_node when absent) and "x-pattern-message" how a pattern mismatch
//     reads to a template author;
//   - the doc comment is its description, shown as help text in the designer.
//
// Adding a field is adding it here with its tags and comment; `make generate` does the rest. Types with a JSON
// form of their own (Duration, OnTimeout, Join) get their schema in service/graph/schemagen, beside the tags' reader.

// Plugins are the plugin names a node runs before it waits (pre) and after it finished (after).
type Plugins struct {
	// Plugins run when the node activates, before it waits (e.g. notify someone), in order.
	Pre []string `json:"pre,omitempty" jsonschema:"pattern=\\S" jsonschema_extras:"x-pattern-message=is empty"`
	// Plugins run when the node has finished (an approval decided, a callback arrived; an auto node's work), in order.
	After []string `json:"after,omitempty" jsonschema:"pattern=\\S" jsonschema_extras:"x-pattern-message=is empty"`
}

// Approvers says who decides an approval node (or who is copied, for cc). The ways may be combined, except
// groups and groups_context, which each stand alone.
type Approvers struct {
	// These users.
	Users []string `json:"users,omitempty" jsonschema:"pattern=\\S,maxLength=200" jsonschema_extras:"x-pattern-message=is empty"`
	// Every user holding one of these roles.
	Roles []string `json:"roles,omitempty" jsonschema:"pattern=\\S,maxLength=200" jsonschema_extras:"x-pattern-message=is empty"`
	// A gjson path into the instance context giving a user or a list of users, e.g. approvers.lead.
	Context string `json:"context,omitempty" jsonschema:"pattern=^\\S*$" jsonschema_extras:"x-pattern-message=is not a context path: it has spaces"`
	// A person relative to the initiator: their manager, their department's leader, or their manager chain
	// (initiator.managers, nearest first, with levels or until_role).
	Relation string `json:"relation,omitempty" jsonschema:"enum=initiator.manager,enum=initiator.department.leader,enum=initiator.managers"`
	// With relation initiator.managers: how many managers up the chain (1 to 20); a shorter chain gives fewer.
	Levels int `json:"levels,omitempty" jsonschema:"minimum=1,maximum=20"`
	// With relation initiator.managers: up the chain until and including the first holder of this role.
	UntilRole string `json:"until_role,omitempty" jsonschema:"maxLength=200,pattern=\\S" jsonschema_extras:"x-pattern-message=is empty"`
	// Every member of these departments.
	Departments []string `json:"departments,omitempty" jsonschema:"pattern=\\S,maxLength=200" jsonschema_extras:"x-pattern-message=is empty"`
	// Where roles are looked up: tenant (the default: every holder), initiator.department (holders in the
	// initiator's department), initiator.department_tree (the nearest department up from the initiator's that has
	// a holder).
	Scope string `json:"scope,omitempty" jsonschema:"enum=tenant,enum=initiator.department,enum=initiator.department_tree"`
	// Parallel sign (并签): one set of tasks per group of users, each group deciding with group_sign; every group must pass.
	Groups [][]string `json:"groups,omitempty"`
	// A gjson path into the instance context giving the groups (a list of lists of users).
	GroupsContext string `json:"groups_context,omitempty" jsonschema:"pattern=^\\S*$" jsonschema_extras:"x-pattern-message=is not a context path: it has spaces"`
}

// IsZero reports whether no approver is named in any way.
func (a Approvers) IsZero() bool {
	return len(a.Users) == 0 && len(a.Roles) == 0 && a.Context == "" && a.Relation == "" &&
		len(a.Groups) == 0 && a.GroupsContext == "" && len(a.Departments) == 0
}

// HasGroups reports whether the approvers are groups (parallel sign), given inline or from the context.
func (a Approvers) HasGroups() bool { return len(a.Groups) > 0 || a.GroupsContext != "" }

// RetryPolicy is how often and how far apart a failing node is retried.
type RetryPolicy struct {
	// How many more times the node runs after it failed, at least 1.
	Count int `json:"count,omitempty" jsonschema:"required,minimum=1"`
	// The pause between two attempts: a duration such as "2s" or a number of seconds.
	Period Duration `json:"period,omitzero"`
}

// CatchPolicy names the node taken when a node's error is caught.
type CatchPolicy struct {
	// The node to go to instead of the outgoing edges (with retry: once the retries are used up).
	Branch string `json:"branch,omitempty" jsonschema:"required,minLength=1"`
}

// ErrorHandler says what happens when a node's plugin or work fails (seed: errorHandler).
type ErrorHandler struct {
	// throw (the default): to the template's error node if it has one, else the instance fails; retry: run again;
	// ignore: carry on as if the node succeeded; catch: go to catch.branch.
	Operation string `json:"operation,omitempty" jsonschema:"enum=throw,enum=retry,enum=ignore,enum=catch,default=throw" jsonschema_extras:"x-discriminator=true"`
	// How often to retry, and how far apart.
	Retry RetryPolicy `json:"retry,omitzero" jsonschema_extras:"x-for=retry,x-required-for=retry"`
	// Where to go: the node taken instead of the outgoing edges.
	Catch CatchPolicy `json:"catch,omitzero" jsonschema_extras:"x-for=catch,x-for=retry,x-required-for=catch"`
}

// Op returns the operation, defaulting to throw.
func (h ErrorHandler) Op() string {
	if h.Operation == "" {
		return ErrorOpThrow
	}
	return h.Operation
}

// Trigger is how instances of a template start. Which fields apply depends on its kind.
type Trigger struct {
	// manual: POST /instances; crontab: on a schedule; sync-api and async-api: a business system calls
	// /trigger/{sync|async}/{module}/{function}; form: people submit the template's form; message: POST /messages
	// with the trigger's message name.
	Kind string `json:"kind" jsonschema:"required,enum=manual,enum=crontab,enum=sync-api,enum=async-api,enum=form,enum=message" jsonschema_extras:"x-discriminator=true"`

	// 5 fields: minute hour day-of-month month day-of-week, e.g. "0 9 * * 1-5"; a "CRON_TZ=Asia/Shanghai " prefix sets the time zone.
	Expr string `json:"expr,omitempty" jsonschema:"minLength=1,example=*/5 * * * *" jsonschema_extras:"x-for=crontab,x-required-for=crontab,x-code=bad_cron"`
	// Start even while the instance started by the previous fire still runs.
	AllowRepeated bool `json:"allow_repeated,omitempty" jsonschema_extras:"x-for=crontab"`
	// The first time the schedule may fire (RFC 3339); empty: from now.
	StartAt string `json:"start_at,omitempty" jsonschema_extras:"x-for=crontab"`
	// The time after which the schedule stops (RFC 3339); empty: never.
	EndAt string `json:"end_at,omitempty" jsonschema_extras:"x-for=crontab"`

	// The module part of the trigger's URL: letters, digits, '.', '_' and '-'.
	Module string `json:"module,omitempty" jsonschema:"minLength=1,pattern=^([A-Za-z0-9_-][A-Za-z0-9._-]?|\\.[A-Za-z0-9_-]|[A-Za-z0-9._-][A-Za-z0-9._-][A-Za-z0-9._-]+)$" jsonschema_extras:"x-for=sync-api,x-for=async-api,x-required-for=sync-api,x-required-for=async-api,x-pattern-message=may hold only letters\\, digits\\, '.'\\, '_' and '-' (it is part of the URL)"`
	// The function part of the trigger's URL: letters, digits, '.', '_' and '-'.
	Function string `json:"function,omitempty" jsonschema:"minLength=1,pattern=^([A-Za-z0-9_-][A-Za-z0-9._-]?|\\.[A-Za-z0-9_-]|[A-Za-z0-9._-][A-Za-z0-9._-][A-Za-z0-9._-]+)$" jsonschema_extras:"x-for=sync-api,x-for=async-api,x-required-for=sync-api,x-required-for=async-api,x-pattern-message=may hold only letters\\, digits\\, '.'\\, '_' and '-' (it is part of the URL)"`
	// The HTTP method callers use: get, post (the default), put, patch or delete.
	Method string `json:"method,omitempty" jsonschema:"pattern=^(?i:get|post|put|patch|delete)$,default=post" jsonschema_extras:"x-for=sync-api,x-for=async-api,x-pattern-message=is not one of get\\, post\\, put\\, patch and delete"`
	// How callers authenticate: none (the default); token: header X-Halley-Token equals header_token; password:
	// headers X-Halley-User and X-Halley-Password equal header_user and header_password.
	LoginVerification string `json:"login_verification,omitempty" jsonschema:"enum=none,enum=token,enum=password,default=none" jsonschema_extras:"x-for=sync-api,x-for=async-api"`
	// The token callers send in X-Halley-Token (login_verification token). Write-only: answers show "***" once it
	// is set, and saving "***" keeps it.
	HeaderToken string `json:"header_token,omitempty" jsonschema:"writeOnly=true" jsonschema_extras:"x-for=sync-api,x-for=async-api"`
	// The user callers send in X-Halley-User (login_verification password).
	HeaderUser string `json:"header_user,omitempty" jsonschema_extras:"x-for=sync-api,x-for=async-api"`
	// The password callers send in X-Halley-Password (login_verification password). Write-only: answers show
	// "***" once it is set, and saving "***" keeps it.
	HeaderPassword string `json:"header_password,omitempty" jsonschema:"writeOnly=true" jsonschema_extras:"x-for=sync-api,x-for=async-api"`
	// Comma-separated IP addresses and CIDRs callers may come from, e.g. "10.0.0.0/8,1.2.3.4"; empty: anyone.
	AllowRemoteIPs string `json:"allow_remote_ips,omitempty" jsonschema_extras:"x-for=sync-api,x-for=async-api"`

	// The form people fill in to start (a form template of the form designer).
	Form json.RawMessage `json:"form,omitempty" jsonschema:"type=object" jsonschema_extras:"x-for=form,x-required-for=form,tsType=FormSchema"`
	// Who may submit the form; empty: everyone.
	Members []string `json:"members,omitempty" jsonschema:"pattern=\\S" jsonschema_extras:"x-for=form,x-pattern-message=is empty"`
	// Submitters must sign in.
	RequireLogin bool `json:"require_login,omitempty" jsonschema_extras:"x-for=form"`

	// The message name: POST /messages with it starts an instance (its data becomes the context, its correlation
	// id the instance's, its sender the initiator).
	Message string `json:"message,omitempty" jsonschema:"minLength=1,maxLength=255,pattern=^(\\S((?s:.*)\\S)?)?$" jsonschema_extras:"x-for=message,x-required-for=message,x-pattern-message=has leading or trailing spaces"`
}

// IsZero reports whether no trigger was given.
func (t Trigger) IsZero() bool {
	return t.Kind == "" && t.Expr == "" && !t.AllowRepeated && t.StartAt == "" && t.EndAt == "" &&
		t.Module == "" && t.Function == "" && t.Method == "" && t.LoginVerification == "" &&
		t.HeaderToken == "" && t.HeaderUser == "" && t.HeaderPassword == "" && t.AllowRemoteIPs == "" &&
		len(t.Form) == 0 && len(t.Members) == 0 && !t.RequireLogin && t.Message == ""
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

// Node is one step of a definition. Its type decides which of the type-specific fields (trigger, approvers, sign,
// interval...) it may have.
type Node struct {
	// Unique within the definition: letters, digits, '_' and '-'.
	ID string `json:"id" jsonschema:"required,minLength=1,maxLength=128,pattern=^[A-Za-z0-9_-]+$" jsonschema_extras:"x-pattern-message=may hold only letters\\, digits\\, '_' and '-'"`
	// start: exactly one, how instances start; approval: people decide; auto: runs its plugins, then passes on;
	// delay: waits; callback: waits for an external call or a message; subprocess: starts instances of another
	// template and waits for them; error: catches unhandled errors; end: a normal end; terminate: ends the
	// instance at once.
	Type string `json:"type" jsonschema:"required,enum=start,enum=approval,enum=auto,enum=delay,enum=callback,enum=subprocess,enum=error,enum=end,enum=terminate" jsonschema_extras:"x-discriminator=true"`
	// Shown to people; the id is shown when there is none.
	Name string `json:"name,omitempty" jsonschema:"maxLength=200"`
	// The name in each language (zh-CN, en): people read their language's, or name when it has none.
	I18n NodeI18n `json:"i18n,omitzero"`
	// How a node with several incoming edges activates: "and" (the default) waits until every incoming branch was
	// taken or not chosen, at least one taken; "or" activates with the first one taken; {"min": N} with N taken.
	Join Join `json:"join,omitzero"`
	// Plugins the node runs.
	Plugins Plugins `json:"plugins,omitzero"`
	// How long the node may take: a duration such as "30m" or "48h", or a number of seconds; 0 or absent: no limit.
	// What happens then depends on on_timeout, timeout_branch or the error handler.
	Timeout Duration `json:"timeout,omitzero"`
	// What happens when a plugin or the node's work fails.
	ErrorHandler ErrorHandler `json:"error_handler,omitzero"`
	// Pass the node through without running it: no tasks, no plugins.
	IsIgnore bool `json:"is_ignore,omitempty"`
	// People copied (抄送) when the node activates; they may read the instance. Users, roles, context or
	// relation, not groups.
	CC Approvers `json:"cc,omitzero"`
	// Free-form data for editors (positions, colours); the engine ignores it.
	Meta json.RawMessage `json:"meta,omitempty" jsonschema:"type=object"`

	// How instances of the template start.
	Trigger Trigger `json:"trigger,omitzero" jsonschema_extras:"x-for=start,x-required-for=start"`

	// Who decides.
	Approvers Approvers `json:"approvers,omitzero" jsonschema_extras:"x-for=approval"`
	// or (或签, the default): the first decision decides; all (会签): everyone must approve, one rejection rejects;
	// sequential (顺序会签): one after another; vote (票签): passes when the share of approvals reaches pass_ratio.
	Sign string `json:"sign,omitempty" jsonschema:"enum=or,enum=all,enum=sequential,enum=vote,default=or" jsonschema_extras:"x-for=approval"`
	// For a vote: the share of approvals that passes, more than 0 and at most 1, e.g. 0.6.
	PassRatio float64 `json:"pass_ratio,omitempty" jsonschema:"minimum=0,maximum=1" jsonschema_extras:"x-for=approval"`
	// How each group of a parallel sign (approvers.groups) decides, as sign; or by default.
	GroupSign string `json:"group_sign,omitempty" jsonschema:"enum=or,enum=all,enum=sequential,enum=vote,default=or" jsonschema_extras:"x-for=approval"`
	// What happens when the timeout passes: approve, reject, remind the approvers, or {"branch": "node-id"} to go
	// to another node.
	OnTimeout OnTimeout `json:"on_timeout,omitzero" jsonschema_extras:"x-for=approval"`
	// The form approvers see (a form template of the form designer); without one they see the start form.
	Form json.RawMessage `json:"form,omitempty" jsonschema:"type=object" jsonschema_extras:"x-for=approval,tsType=FormSchema"`
	// What happens when nobody is left to decide: error (the default: node error no_approver), pass (the node
	// passes, recorded as task.auto_approved), reject (the node is rejected), admins (the tenant's admins decide).
	OnNoApprover string `json:"on_no_approver,omitempty" jsonschema:"enum=error,enum=pass,enum=reject,enum=admins,default=error" jsonschema_extras:"x-for=approval"`
	// The initiator is never an approver of this node (separation of duties); if nobody remains, on_no_approver
	// applies.
	ExcludeInitiator bool `json:"exclude_initiator,omitempty" jsonschema_extras:"x-for=approval"`

	// How long to wait: a duration such as "10m" or a number of seconds.
	Interval Duration `json:"interval,omitzero" jsonschema_extras:"x-for=delay"`
	// Wait until this time: an RFC 3339 time, or a context path giving one.
	Until string `json:"until,omitempty" jsonschema_extras:"x-for=delay"`

	// The node taken when the timeout passes; without it the node fails and its error handler applies.
	TimeoutBranch string `json:"timeout_branch,omitempty" jsonschema_extras:"x-for=callback"`
	// A message name: POST /messages with this name and the instance's correlation id resumes the node.
	Message string `json:"message,omitempty" jsonschema:"maxLength=255,pattern=^(\\S((?s:.*)\\S)?)?$" jsonschema_extras:"x-for=callback,x-pattern-message=has leading or trailing spaces"`

	// The key of the template whose instances the node starts (a published template other than this one).
	Template string `json:"template,omitempty" jsonschema:"maxLength=128" jsonschema_extras:"x-for=subprocess,x-required-for=subprocess"`
	// The version of template to start; absent: its latest published version when this instance started.
	Version int `json:"version,omitempty" jsonschema:"minimum=1" jsonschema_extras:"x-for=subprocess"`
	// The child's context: child path -> path in this instance's context ("$" = the whole context).
	Input map[string]string `json:"input,omitempty" jsonschema_extras:"x-for=subprocess"`
	// What comes back when the child completed: path in this instance's context -> child path ("$" = the
	// child's whole context). With for_each each child's mapping is an element of <node id>.items.
	Output map[string]string `json:"output,omitempty" jsonschema_extras:"x-for=subprocess"`
	// A context path holding an array: one child per element (at most 1000), with item and index in its context.
	ForEach string `json:"for_each,omitempty" jsonschema:"maxLength=255" jsonschema_extras:"x-for=subprocess"`
	// With for_each: "all" (the default) waits for every child, {"min": N} continues once N completed and
	// terminates the rest.
	Completion Completion `json:"completion,omitzero" jsonschema_extras:"x-for=subprocess"`
}

// Label returns the node's name, or its id when it has none.
func (n *Node) Label() string {
	if n.Name != "" {
		return n.Name
	}
	return n.ID
}

// JoinMode returns the join mode (JoinAnd, JoinOr or JoinMin), JoinAnd by default.
func (n *Node) JoinMode() string {
	if n.Join.Mode == "" {
		return JoinAnd
	}
	return n.Join.Mode
}

// SignMode returns the sign mode: SignOr by default, SignSequential for a manager chain.
func (n *Node) SignMode() string {
	if n.Sign == "" {
		if n.Approvers.Relation == RelationInitiatorManagers {
			return SignSequential // a manager chain is approved one after another unless sign says otherwise
		}
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

// Edge connects two nodes. Without a condition it is always taken; a default edge is taken only when no sibling
// edge (same From) is.
type Edge struct {
	// An optional id, unique among the edges.
	ID string `json:"id,omitempty"`
	// The node the edge leaves.
	From string `json:"from" jsonschema:"required,minLength=1" jsonschema_extras:"x-code=unknown_node"`
	// The node the edge enters.
	To string `json:"to" jsonschema:"required,minLength=1" jsonschema_extras:"x-code=unknown_node"`
	// A MongoDB-style query over the instance context, e.g. {"days": {"$gt": 3}}; without one the edge is always taken.
	Condition json.RawMessage `json:"condition,omitempty" jsonschema:"type=object" jsonschema_extras:"x-code=bad_condition"`
	// Taken only when no other edge from the same node is taken.
	Default bool `json:"default,omitempty"`
	// Free-form data for editors; the engine ignores it.
	Meta json.RawMessage `json:"meta,omitempty" jsonschema:"type=object"`
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
// Lookups (Node, Outgoing, Incoming, Start, ErrorNode) use an index built by Index; json.Unmarshal (and
// graph.Parse) build it. Build it before sharing a definition between goroutines; after that the lookups only
// read, and the nodes they return must not be changed. A definition changed after indexing (nodes or edges added
// or removed) falls back to linear scans until it is indexed again.
type Definition struct {
	// The steps of the process.
	Nodes []Node `json:"nodes"`
	// The connections between the steps.
	Edges []Edge `json:"edges"`
	// Settings of the whole process.
	Options Options `json:"options,omitzero"`
	// Free-form data for editors (zoom, layout); the engine ignores it.
	Meta json.RawMessage `json:"meta,omitempty" jsonschema:"type=object"`
	// The title of each instance, rendered when it starts (and again when a resubmit changed its data) unless the
	// starter gave one: text with placeholders {initiator} (the initiator's display name), {template} (the
	// template's name), {date} (the start date, YYYY-MM-DD) and {path} (a value of the request's data, e.g.
	// {days} or {leave.type}); {{ and }} write a brace. A missing value renders empty.
	TitlePattern string `json:"title_pattern,omitempty" jsonschema:"maxLength=500"`
	// The template's name and description and the title pattern in each language (zh-CN, en).
	I18n DefinitionI18n `json:"i18n,omitzero"`

	idx *defIndex
}

// Options are the settings of a whole definition (the definition-level "options" object of API.md).
type Options struct {
	// How long an ended instance of this version stays in the database before the retention sweep writes it to
	// the archive and deletes it: a duration such as "720h" or a number of seconds; 0 keeps the instances
	// forever. Absent: HALLEY_INSTANCE_RETENTION applies.
	Retention *Duration `json:"retention,omitempty"`
	// When the initiator is an approver: allow (the default: they decide like anyone), pass (their task is
	// approved automatically), manager (their manager decides in their place).
	SelfApproval string `json:"self_approval,omitempty" jsonschema:"enum=allow,enum=pass,enum=manager,default=allow"`
	// Approvers decided automatically because they approved before: none (the default), consecutive (who approved
	// the directly preceding approval node), any (who approved any earlier node of the instance).
	Dedupe string `json:"dedupe,omitempty" jsonschema:"enum=none,enum=consecutive,enum=any,default=none"`
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

// UnmarshalJSON decodes leniently (stored definitions, drafts) and builds the index. Use graph.Parse to decode a
// definition from a user: it checks it against the schema first.
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

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// strictUnmarshal decodes one JSON value, refusing unknown object fields at every depth.
func strictUnmarshal(v json.RawMessage, dst any) error {
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.DisallowUnknownFields()
	return dec.Decode(dst)
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
