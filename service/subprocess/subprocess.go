// Package subprocess wires sub-processes (API.md "Sub-processes") around the engine: the outbox handlers that
// resume a parent when its children end and terminate the children of a node visit that ended, and the publish
// check that refuses a template calling an unknown template or, directly or indirectly, itself. The steps
// themselves are the engine's (service/engine/subprocess.go).
package subprocess

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/outbox"
	"github.com/halley-bpm/halley/service/template"
)

// Engine is what the handlers need of the engine (*engine.Engine).
type Engine interface {
	ChildrenEnded(ctx context.Context, tenant, parentID string, ends []model.ChildEnd) error
	CancelChild(ctx context.Context, tenant, childID string, c model.ChildCancel) error
}

// Handlers are the outbox handlers of the sub-process kinds. Each runs its engine steps in the dispatch's
// transaction (the store joins it), so a row is deleted exactly when its step commits.
func Handlers(eng Engine) outbox.Handlers {
	return outbox.Handlers{model.OutboxChildEnded: ended(eng), model.OutboxChildCancel: cancel(eng)}
}

// ended resumes each parent once with all its children's ends of the batch, in the order they were written.
func ended(eng Engine) outbox.Handler {
	return func(ctx context.Context, items []model.OutboxItem) error {
		type parent struct{ tenant, id string }
		var order []parent
		byParent := map[parent][]model.ChildEnd{}
		for _, it := range items {
			var end model.ChildEnd
			if err := json.Unmarshal(it.Payload, &end); err != nil {
				return fmt.Errorf("subprocess: bad %s payload for %s: %w", it.Kind, it.Ref, err)
			}
			p := parent{it.TenantID, it.Ref}
			if _, ok := byParent[p]; !ok {
				order = append(order, p)
			}
			byParent[p] = append(byParent[p], end)
		}
		for _, p := range order {
			if err := eng.ChildrenEnded(ctx, p.tenant, p.id, byParent[p]); err != nil {
				return fmt.Errorf("subprocess: resume parent %s: %w", p.id, err)
			}
		}
		return nil
	}
}

func cancel(eng Engine) outbox.Handler {
	return func(ctx context.Context, items []model.OutboxItem) error {
		for _, it := range items {
			var c model.ChildCancel
			if err := json.Unmarshal(it.Payload, &c); err != nil {
				return fmt.Errorf("subprocess: bad %s payload for %s: %w", it.Kind, it.Ref, err)
			}
			if err := eng.CancelChild(ctx, it.TenantID, it.Ref, c); err != nil {
				return fmt.Errorf("subprocess: cancel child %s: %w", it.Ref, err)
			}
		}
		return nil
	}
}

// Versions reads published template versions (the template store).
type Versions interface {
	LatestVersion(ctx context.Context, tenant, key string) (int, error)
	GetVersion(ctx context.Context, tenant, key string, version int) (*model.TemplateVersion, error)
}

// Checker is the template.Publisher that refuses, at publish, a subprocess node naming a template that has no
// published version (or not the version it pins): unknown_template; and a template that would call itself,
// directly or through the latest (or pinned) versions of the templates it calls: subprocess_cycle, naming the
// path of template keys.
type Checker struct {
	store Versions
}

// NewChecker returns the publish check over the template store.
func NewChecker(store Versions) *Checker { return &Checker{store: store} }

var _ template.Publisher = (*Checker)(nil)

// Published does nothing: the check is all.
func (*Checker) Published(context.Context, string, string, *template.Compiled) {}

// CheckPublish implements template.Publisher.
func (ck *Checker) CheckPublish(ctx context.Context, tenant, key string, c *template.Compiled) error {
	seen := map[string]bool{}
	for _, n := range calls(c.Def) {
		if n.Template == key {
			return cycle([]string{key, key}, n.ID)
		}
		v, err := ck.version(ctx, tenant, n.Template, n.Version)
		if err != nil {
			return err
		}
		if v == 0 {
			return unknown(n)
		}
		if path, err := ck.walk(ctx, tenant, key, n.Template, v, []string{key}, seen); err != nil || path != nil {
			if err == nil {
				err = cycle(path, n.ID)
			}
			return err
		}
	}
	return nil
}

// walk follows the calls of version v of template at: the path to key when one leads back to it.
func (ck *Checker) walk(ctx context.Context, tenant, key, at string, v int, path []string, seen map[string]bool) ([]string, error) {
	path = append(path[:len(path):len(path)], at)
	id := fmt.Sprintf("%s@%d", at, v)
	if seen[id] {
		return nil, nil
	}
	seen[id] = true
	tv, err := ck.store.GetVersion(ctx, tenant, at, v)
	if err != nil {
		return nil, err
	}
	var def model.Definition
	if err := json.Unmarshal(tv.Definition, &def); err != nil {
		return nil, fmt.Errorf("subprocess: stored version %s does not read: %w", id, err)
	}
	for _, n := range calls(&def) {
		if n.Template == key {
			return append(path, key), nil
		}
		nv, err := ck.version(ctx, tenant, n.Template, n.Version)
		if err != nil || nv == 0 {
			continue // a published version calling a template that is gone: its own node fails at run time
		}
		if p, err := ck.walk(ctx, tenant, key, n.Template, nv, path, seen); err != nil || p != nil {
			return p, err
		}
	}
	return nil, nil
}

// version is the version a call starts: the pinned one when it is published, else the latest (0: none).
func (ck *Checker) version(ctx context.Context, tenant, key string, pinned int) (int, error) {
	latest, err := ck.store.LatestVersion(ctx, tenant, key)
	if model.IsKind(err, model.ENOTFOUND) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if pinned > 0 {
		if pinned > latest {
			return 0, nil
		}
		return pinned, nil
	}
	return latest, nil
}

// calls lists the subprocess nodes of a definition.
func calls(d *model.Definition) []*model.Node {
	var out []*model.Node
	for i := range d.Nodes {
		if n := &d.Nodes[i]; n.Type == model.NodeSubprocess && n.Template != "" {
			out = append(out, n)
		}
	}
	return out
}

func unknown(n *model.Node) error {
	what := fmt.Sprintf("template %q has no published version", n.Template)
	if n.Version > 0 {
		what = fmt.Sprintf("template %q has no published version %d", n.Template, n.Version)
	}
	return model.CodedError(model.EUNPROCESSABLE, "unknown_template", "subprocess node %q: %s", n.ID, what).
		WithDetails(map[string]any{"node_id": n.ID, "template": n.Template})
}

func cycle(path []string, nodeID string) error {
	return model.CodedError(model.EUNPROCESSABLE, "subprocess_cycle", "sub-processes would call themselves: %s", strings.Join(path, " → ")).
		WithDetails(map[string]any{"path": path, "node_id": nodeID})
}

// Later is an Engine known only after the outbox dispatcher is built (the engine needs the dispatcher, whose
// handlers need the engine): Set it before the dispatcher runs.
type Later struct {
	eng Engine
}

// Set gives the engine the handlers call.
func (l *Later) Set(eng Engine) { l.eng = eng }

// ChildrenEnded implements Engine.
func (l *Later) ChildrenEnded(ctx context.Context, tenant, parentID string, ends []model.ChildEnd) error {
	if l.eng == nil {
		return fmt.Errorf("subprocess: no engine yet")
	}
	return l.eng.ChildrenEnded(ctx, tenant, parentID, ends)
}

// CancelChild implements Engine.
func (l *Later) CancelChild(ctx context.Context, tenant, childID string, c model.ChildCancel) error {
	if l.eng == nil {
		return fmt.Errorf("subprocess: no engine yet")
	}
	return l.eng.CancelChild(ctx, tenant, childID, c)
}
