package graph

import (
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/halley-bpm/halley/model"
)

// checkNode reports what the schema cannot see in one node's own fields (bad_node, bad_cron): the nodes its
// branches name, the rules that tie its fields together, and what its values mean. It records the implicit arcs
// of its branches.
func (v *validator) checkNode(i int, n *model.Node) {
	name := label(i, n)
	bad := func(format string, args ...any) { v.add(model.CodeBadNode, at(n.ID), format, args...) }

	v.checkJoin(n, name, bad)
	v.checkErrorHandler(i, n, name)
	if !n.CC.IsZero() {
		v.checkApprovers(name, "cc", n.CC, bad)
		if n.CC.HasGroups() {
			bad("node %q: cc takes users, roles, context or relation, not groups", name)
		}
	}

	checkFormLabels(name, "form", n.Form, bad)
	checkFormLabels(name, "start form", n.Trigger.Form, bad)
	switch n.Type {
	case model.NodeStart:
		v.checkTrigger(name, n, bad)
	case model.NodeApproval:
		v.checkApproval(i, n, name, bad)
	case model.NodeDelay:
		checkDelay(name, n, bad)
	case model.NodeSubprocess:
		checkSubprocess(name, n, bad)
	case model.NodeCallback:
		if n.TimeoutBranch != "" {
			v.branch(i, name, "timeout_branch", n.TimeoutBranch, bad)
			if n.Timeout == 0 {
				bad("node %q: timeout_branch %q is taken when the timeout passes, but the node has no timeout", name, n.TimeoutBranch)
			}
		}
	}
}

// checkJoin checks what the schema cannot: that {"min":N} can activate (N is at most the node's number of
// incoming edges); cancel_rest goes with it (the engine's cancelrest.go). The form of a join ("and", "or" or {"min": N} with N at least 1) is the schema's.
func (v *validator) checkJoin(n *model.Node, name string, bad func(string, ...any)) {
	j := n.Join
	if j.Mode != model.JoinMin {
		return
	}
	if j.Min < 1 { // the schema's to report
		return
	}
	if in := len(v.d.Incoming(n.ID)); j.Min > in {
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

// checkErrorHandler checks the node catch.branch names: with catch, and with retry once the retries are used up.
// Which fields each operation takes is the schema's.
func (v *validator) checkErrorHandler(i int, n *model.Node, name string) {
	h := n.ErrorHandler
	if h.Catch.Branch == "" {
		return
	}
	switch h.Op() {
	case model.ErrorOpCatch, model.ErrorOpRetry:
		v.branch(i, name, "error_handler.catch.branch", h.Catch.Branch, func(format string, args ...any) {
			v.add(model.CodeBadNode, at(n.ID), format, args...)
		})
	}
}

func (v *validator) checkTrigger(name string, n *model.Node, bad func(string, ...any)) {
	t := n.Trigger
	switch t.Kind {
	case model.TriggerCrontab:
		if strings.TrimSpace(t.Expr) != "" {
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
		if _, err := t.RemoteIPPrefixes(); err != nil {
			bad("node %q: trigger %v", name, err)
		}
	}
}

func (v *validator) checkApproval(i int, n *model.Node, name string, bad func(string, ...any)) {
	a := n.Approvers
	if a.IsZero() {
		bad("approval node %q needs approvers: users, roles, context, relation, groups or groups_context", name)
	} else {
		v.checkApprovers(name, "approvers", a, bad)
	}
	if n.GroupSign != "" && !a.HasGroups() {
		bad("node %q: group_sign applies only to groups or groups_context approvers", name)
	}
	vote := n.SignMode() == model.SignVote || a.HasGroups() && n.GroupSignMode() == model.SignVote
	switch {
	case vote && n.PassRatio == 0:
		bad("node %q: a vote needs pass_ratio in (0, 1], the share of approvals that passes, e.g. 0.6", name)
	case !vote && n.PassRatio != 0:
		bad("node %q: pass_ratio applies only to sign vote", name)
	}
	o := n.OnTimeout
	if o.Branch != "" {
		v.branch(i, name, "on_timeout branch", o.Branch, bad)
	}
	if !o.IsZero() && n.Timeout == 0 {
		bad("node %q: on_timeout applies when the timeout passes, but the node has no timeout", name)
	}
}

// checkApprovers checks how the ways of naming approvers combine, and the members of inline groups (a list of
// lists, which the schema's tags cannot reach). Each name in users and roles is the schema's.
func (v *validator) checkApprovers(name, field string, a model.Approvers, bad func(string, ...any)) {
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
	if a.HasGroups() && (len(a.Users) > 0 || len(a.Roles) > 0 || a.Context != "" || a.Relation != "" || len(a.Departments) > 0) {
		bad("node %q: %s groups stand alone: they cannot be combined with users, roles, departments, context or relation", name, field)
	}
	chain := a.Relation == model.RelationInitiatorManagers
	switch {
	case chain && a.Levels == 0 && a.UntilRole == "":
		bad("node %q: %s.relation initiator.managers needs levels (1 to %d) or until_role", name, field, model.MaxManagerLevels)
	case chain && a.Levels != 0 && a.UntilRole != "":
		bad("node %q: %s.relation initiator.managers takes levels or until_role, not both", name, field)
	case !chain && a.Levels != 0:
		bad("node %q: %s.levels applies only to relation initiator.managers", name, field)
	case !chain && a.UntilRole != "":
		bad("node %q: %s.until_role applies only to relation initiator.managers", name, field)
	}
	if a.Levels < 0 || a.Levels > model.MaxManagerLevels { // the schema reports it too; this names the bound for code-built definitions
		bad("node %q: %s.levels must be 1 to %d", name, field, model.MaxManagerLevels)
	}
	if a.Scope != "" && len(a.Roles) == 0 {
		bad("node %q: %s.scope applies only to roles", name, field)
	}
}

func checkDelay(name string, n *model.Node, bad func(string, ...any)) {
	switch {
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
