package graph

import (
	"bytes"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/halley-bpm/halley/model"
)

// checkNode reports the problems of one node's own fields (bad_node, bad_cron) and records the implicit arcs
// of its branches.
func (v *validator) checkNode(i int, n *model.Node) {
	name := label(i, n)
	bad := func(format string, args ...any) { v.add(model.CodeBadNode, at(n.ID), format, args...) }

	if msg := model.NodeTypeMessage(name, n.Type); msg != "" {
		bad("%s", msg)
	}
	for _, f := range n.ForeignFields() {
		bad("%s", model.ForeignFieldMessage(name, n.Type, f))
	}
	v.checkJoin(n, name, bad)
	if utf8.RuneCountInString(n.Name) > model.MaxNodeNameLen {
		bad("node %q: name may be at most %d characters long", name, model.MaxNodeNameLen)
	}
	if n.Timeout < 0 {
		bad("node %q: timeout %s is negative", name, n.Timeout)
	}
	for _, phase := range []struct {
		name  string
		names []string
	}{{"pre", n.Plugins.Pre}, {"after", n.Plugins.After}} {
		for _, p := range phase.names {
			if strings.TrimSpace(p) == "" {
				bad("node %q: plugins.%s has an empty plugin name", name, phase.name)
			}
		}
	}
	v.checkErrorHandler(i, n, name, bad)
	if !n.CC.IsZero() {
		v.checkApprovers(name, "cc", n.CC, bad)
		if n.CC.HasGroups() {
			bad("node %q: cc takes users, roles, context or relation, not groups", name)
		}
	}

	switch n.Type {
	case model.NodeStart:
		v.checkTrigger(name, n, bad)
	case model.NodeApproval:
		v.checkApproval(i, n, name, bad)
	case model.NodeDelay:
		checkDelay(name, n, bad)
	case model.NodeCallback:
		if n.TimeoutBranch != "" {
			v.branch(i, name, "timeout_branch", n.TimeoutBranch, bad)
			if n.Timeout == 0 {
				bad("node %q: timeout_branch %q is taken when the timeout passes, but the node has no timeout", name, n.TimeoutBranch)
			}
		}
		if utf8.RuneCountInString(n.Message) > model.MaxMessageLen {
			bad("node %q: message may be at most %d characters long", name, model.MaxMessageLen)
		}
		if n.Message != "" && strings.TrimSpace(n.Message) != n.Message {
			bad("node %q: message %q has leading or trailing spaces", name, n.Message)
		}
	}
}

// checkJoin checks a node's join: "and", "or" or {"min":N} with 1 <= N <= its number of incoming edges.
// cancel_rest is refused: it is reserved for the discriminator of the sub-process work and not implemented yet.
func (v *validator) checkJoin(n *model.Node, name string, bad func(string, ...any)) {
	j := n.Join
	switch j.Mode {
	case "", model.JoinAnd, model.JoinOr:
		return
	case model.JoinMin:
	default:
		bad("node %q: join must be \"and\", \"or\" or {\"min\": N}, not %q", name, j.Mode)
		return
	}
	if j.CancelRest {
		bad("node %q: join cancel_rest is not supported yet; use {\"min\": %d} (the other branches then run on and are absorbed)", name, j.Min)
	}
	in := 0
	for i := range v.d.Edges {
		if v.d.Edges[i].To == n.ID {
			in++
		}
	}
	switch {
	case j.Min < 1:
		bad("node %q: join {\"min\": %d} needs N of at least 1", name, j.Min)
	case j.Min > in:
		bad("node %q: join {\"min\": %d} can never activate: the node has %d incoming edges", name, j.Min, in)
	}
}

// branch checks a node id that a field of node i names as a branch, and records the implicit arc.
func (v *validator) branch(i int, name, field, target string, bad func(string, ...any)) {
	j, ok := v.idx[target]
	if !ok {
		bad("node %q: %s names node %q, which does not exist", name, field, target)
		return
	}
	switch t := v.d.Nodes[j].Type; t {
	case model.NodeStart, model.NodeError:
		bad("node %q: %s names the %s node %q, which cannot be branched to", name, field, t, target)
		return
	}
	if v.first(i) {
		v.arcs = append(v.arcs, arc{int32(i), j})
	}
}

func (v *validator) checkErrorHandler(i int, n *model.Node, name string, bad func(string, ...any)) {
	h := n.ErrorHandler
	switch h.Operation {
	case "", model.ErrorOpThrow, model.ErrorOpRetry, model.ErrorOpIgnore, model.ErrorOpCatch:
	default:
		bad("node %q: error_handler.operation must be retry, ignore, catch or throw, not %q", name, h.Operation)
		return
	}
	op := h.Op()
	if h.Retry.Period < 0 {
		bad("node %q: error_handler.retry.period %s is negative", name, h.Retry.Period)
	}
	switch {
	case op == model.ErrorOpRetry && h.Retry.Count < 1:
		bad("node %q: error_handler retries need retry.count of at least 1, got %d", name, h.Retry.Count)
	case op != model.ErrorOpRetry && h.Retry != (model.RetryPolicy{}):
		bad("node %q: error_handler.retry applies only to operation retry, not %s", name, op)
	}
	switch {
	case op == model.ErrorOpCatch && h.Catch.Branch == "":
		bad("node %q: error_handler operation catch needs catch.branch, the node to go to", name)
	case op == model.ErrorOpCatch, op == model.ErrorOpRetry && h.Catch.Branch != "":
		// With retry, catch.branch is where the flow goes once the retries are exhausted.
		v.branch(i, name, "error_handler.catch.branch", h.Catch.Branch, bad)
	case h.Catch.Branch != "":
		bad("node %q: error_handler.catch applies only to operations catch and retry, not %s", name, op)
	}
}

func (v *validator) checkTrigger(name string, n *model.Node, bad func(string, ...any)) {
	t := n.Trigger
	for _, f := range t.ForeignFields() {
		bad("%s", model.TriggerForeignFieldMessage(name, t.Kind, f))
	}
	switch t.Kind {
	case "":
		bad("start node %q needs a trigger, e.g. {\"kind\": \"manual\"}", name)
	case model.TriggerManual:
	case model.TriggerCrontab:
		switch {
		case strings.TrimSpace(t.Expr) == "":
			v.add(model.CodeBadCron, at(n.ID), "node %q: a crontab trigger needs expr, e.g. \"*/5 * * * *\"", name)
		default:
			if _, err := v.cron.Parse(t.Expr); err != nil {
				v.add(model.CodeBadCron, at(n.ID), "node %q: crontab expr %q: %v (5 fields: minute hour day-of-month month day-of-week)", name, t.Expr, err)
			}
		}
		start, end, err := t.Window()
		switch {
		case err != nil:
			bad("node %q: trigger %v", name, err)
		case !start.IsZero() && !end.IsZero() && !end.After(start):
			bad("node %q: trigger end_at %s is not after start_at %s", name, t.EndAt, t.StartAt)
		}
	case model.TriggerSyncAPI, model.TriggerAsyncAPI:
		for _, f := range []struct{ field, value string }{{"module", t.Module}, {"function", t.Function}} {
			switch {
			case f.value == "":
				bad("node %q: a %s trigger needs %s (it is part of the URL /trigger/%s/{module}/{function})", name, t.Kind, f.field, strings.TrimSuffix(t.Kind, "-api"))
			case !validPathSegment(f.value):
				bad("node %q: trigger %s %q may hold only letters, digits, '.', '_' and '-'", name, f.field, f.value)
			}
		}
		switch strings.ToUpper(t.Method) {
		case "", "GET", "POST", "PUT", "PATCH", "DELETE":
		default:
			bad("node %q: trigger method must be get, post, put, patch or delete, not %q", name, t.Method)
		}
		switch t.LoginVerification {
		case "", model.LoginNone, model.LoginToken, model.LoginPassword:
		default:
			bad("node %q: trigger login_verification must be none, token or password, not %q", name, t.LoginVerification)
		}
		if _, err := t.RemoteIPPrefixes(); err != nil {
			bad("node %q: trigger %v", name, err)
		}
	case model.TriggerForm:
		if f := bytes.TrimSpace(t.Form); len(f) == 0 || f[0] != '{' {
			bad("node %q: a form trigger needs form, the form definition object", name)
		}
		for _, m := range t.Members {
			if strings.TrimSpace(m) == "" {
				bad("node %q: trigger members has an empty name", name)
				break
			}
		}
	case model.TriggerMessage:
		switch {
		case t.Message == "":
			bad("node %q: a message trigger needs message, the message name that POST /messages sends", name)
		case utf8.RuneCountInString(t.Message) > model.MaxMessageLen:
			bad("node %q: trigger message may be at most %d characters long", name, model.MaxMessageLen)
		case strings.TrimSpace(t.Message) != t.Message:
			bad("node %q: trigger message %q has leading or trailing spaces", name, t.Message)
		}
	default:
		bad("node %q: unknown trigger kind %q (one of manual, crontab, sync-api, async-api, form, message)", name, t.Kind)
	}
}

func validPathSegment(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return s != "." && s != ".."
}

func (v *validator) checkApproval(i int, n *model.Node, name string, bad func(string, ...any)) {
	a := n.Approvers
	if a.IsZero() {
		bad("approval node %q needs approvers: users, roles, context, relation, groups or groups_context", name)
	} else {
		v.checkApprovers(name, "approvers", a, bad)
	}
	validSign := func(s string) bool {
		switch s {
		case "", model.SignOr, model.SignAll, model.SignSequential, model.SignVote:
			return true
		}
		return false
	}
	if !validSign(n.Sign) {
		bad("node %q: sign must be or, all, sequential or vote, not %q", name, n.Sign)
	}
	switch {
	case !validSign(n.GroupSign):
		bad("node %q: group_sign must be or, all, sequential or vote, not %q", name, n.GroupSign)
	case n.GroupSign != "" && !a.HasGroups():
		bad("node %q: group_sign applies only to groups or groups_context approvers", name)
	}
	vote := n.SignMode() == model.SignVote || a.HasGroups() && n.GroupSignMode() == model.SignVote
	switch {
	case vote && !(n.PassRatio > 0 && n.PassRatio <= 1):
		bad("node %q: a vote needs pass_ratio in (0, 1], e.g. 0.6; got %v", name, n.PassRatio)
	case !vote && n.PassRatio != 0:
		bad("node %q: pass_ratio applies only to sign vote", name)
	}
	o := n.OnTimeout
	switch o.Action {
	case "", model.TimeoutApprove, model.TimeoutReject, model.TimeoutRemind:
	default:
		bad("node %q: on_timeout must be \"approve\", \"reject\", \"remind\" or {\"branch\": \"node-id\"}, not %q", name, o.Action)
	}
	if o.Branch != "" {
		v.branch(i, name, "on_timeout branch", o.Branch, bad)
	}
	if !o.IsZero() && n.Timeout == 0 {
		bad("node %q: on_timeout applies when the timeout passes, but the node has no timeout", name)
	}
}

func (v *validator) checkApprovers(name, field string, a model.Approvers, bad func(string, ...any)) {
	for _, l := range []struct {
		field string
		names []string
	}{{"users", a.Users}, {"roles", a.Roles}} {
		for _, u := range l.names {
			if strings.TrimSpace(u) == "" {
				bad("node %q: %s.%s has an empty name", name, field, l.field)
				break
			}
			if utf8.RuneCountInString(u) > model.MaxPersonLen {
				bad("node %q: %s.%s has a name longer than %d characters", name, field, l.field, model.MaxPersonLen)
				break
			}
		}
	}
	switch a.Relation {
	case "", model.RelationInitiatorManager, model.RelationInitiatorDepartmentLeader:
	default:
		bad("node %q: %s.relation must be %q or %q, not %q", name, field, model.RelationInitiatorManager, model.RelationInitiatorDepartmentLeader, a.Relation)
	}
	for _, p := range []struct{ field, path string }{{"context", a.Context}, {"groups_context", a.GroupsContext}} {
		if strings.IndexFunc(p.path, unicode.IsSpace) >= 0 {
			bad("node %q: %s.%s %q is not a context path", name, field, p.field, p.path)
		}
	}
	for k, g := range a.Groups {
		if len(g) == 0 {
			bad("node %q: %s.groups[%d] is empty", name, field, k)
			continue
		}
		for _, u := range g {
			if strings.TrimSpace(u) == "" {
				bad("node %q: %s.groups[%d] has an empty name", name, field, k)
				break
			}
			if utf8.RuneCountInString(u) > model.MaxPersonLen {
				bad("node %q: %s.groups[%d] has a name longer than %d characters", name, field, k, model.MaxPersonLen)
				break
			}
		}
	}
	if len(a.Groups) > 0 && a.GroupsContext != "" {
		bad("node %q: %s has both groups and groups_context; give one", name, field)
	}
	if a.HasGroups() && (len(a.Users) > 0 || len(a.Roles) > 0 || a.Context != "" || a.Relation != "") {
		bad("node %q: %s groups stand alone: they cannot be combined with users, roles, context or relation", name, field)
	}
}

func checkDelay(name string, n *model.Node, bad func(string, ...any)) {
	switch {
	case n.Interval < 0:
		bad("node %q: interval %s is negative", name, n.Interval)
	case n.Interval == 0 && n.Until == "":
		bad("delay node %q needs interval (a duration or seconds) or until (an RFC 3339 time or a context path)", name)
	case n.Interval != 0 && n.Until != "":
		bad("delay node %q has both interval and until; give one", name)
	}
	if n.Until == "" {
		return
	}
	if _, err := time.Parse(time.RFC3339, n.Until); err == nil {
		return
	}
	if c := n.Until[0]; '0' <= c && c <= '9' || strings.IndexFunc(n.Until, unicode.IsSpace) >= 0 {
		bad("node %q: until %q is neither an RFC 3339 time (2006-01-02T15:04:05Z) nor a context path", name, n.Until)
	}
}
