// Package enginetest builds engines for tests as the composition root builds them, minus what tests do not use:
// nobody subscribed to events, an outbox nobody drains (tests look at its rows or dispatch it themselves), no
// plugin executor in the process, and URLs under a test host. Tests of the engine, the triggers, the retention
// sweep and the HTTP server share it instead of each wiring an engine of their own.
package enginetest

import (
	"net/url"
	"testing"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/plugin"
	"github.com/halley-bpm/halley/service/engine"
	"github.com/halley-bpm/halley/service/rules"
	"github.com/halley-bpm/halley/service/template"
)

// NoEvents is an engine.EventSink with no subscriptions.
type NoEvents struct{}

// Wants answers false: nobody subscribed.
func (NoEvents) Wants(string, string, string) bool { return false }

// Nobody is an engine.Notifier that nobody listens to.
type Nobody struct{}

// Notify does nothing.
func (Nobody) Notify() {}

// URLs are URLs under http://halley.test for the engine to hand out. Tests that follow such a URL through the
// router give the engine the server's own (server.NewURLs).
type URLs struct{}

// Callback is http://halley.test/callback/{instance}/{node instance}?token=….
func (URLs) Callback(instanceID, nodeInstanceID, token string) string {
	return "http://halley.test/callback/" + instanceID + "/" + nodeInstanceID + "?token=" + url.QueryEscape(token)
}

// PluginResult is http://halley.test/plugin-runs/{run}/result?token=….
func (URLs) PluginResult(runID, token string) string {
	return "http://halley.test/plugin-runs/" + runID + "/result?token=" + url.QueryEscape(token)
}

// Deps are an engine's dependencies over st (a *store.Store, or a test's wrapper of one: it holds the plugin
// files), the template service and the directory, with the stand-ins above and no local executor.
func Deps(t testing.TB, st engine.Store, tpl *template.Service, dir engine.Directory) engine.Deps {
	t.Helper()
	src, ok := st.(plugin.BlobSource)
	if !ok {
		t.Fatalf("enginetest: store %T holds no plugin files (plugin.BlobSource)", st)
	}
	files, err := plugin.NewCache(t.TempDir(), src)
	if err != nil {
		t.Fatal(err)
	}
	return engine.Deps{Store: st, Templates: tpl, Directory: dir, Rules: Rules(t, st, dir, rules.Options{}), Events: NoEvents{}, InStep: engine.NoInStep, Outbox: Nobody{},
		PluginFiles: files, Executor: engine.NoExecutor, URLs: URLs{}}
}

// Rules is the rules service over dir (or st, when dir is not a rules.Directory) and st's delegations.
func Rules(t testing.TB, st engine.Store, dir engine.Directory, opts rules.Options) *rules.Service {
	t.Helper()
	rdir, ok := dir.(rules.Directory)
	if !ok {
		if rdir, ok = st.(rules.Directory); !ok {
			t.Fatalf("enginetest: neither %T nor %T is a rules.Directory", dir, st)
		}
	}
	dels, ok := st.(model.DelegationStore)
	if !ok {
		t.Fatalf("enginetest: store %T keeps no delegations", st)
	}
	r, err := rules.New(rules.Deps{Directory: rdir, Delegations: dels}, opts)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// New returns an engine over Deps(t, st, tpl, dir) with the options, failing the test when New does.
func New(t testing.TB, st engine.Store, tpl *template.Service, dir engine.Directory, opts engine.Options) *engine.Engine {
	t.Helper()
	eng, err := engine.New(Deps(t, st, tpl, dir), opts)
	if err != nil {
		t.Fatal(err)
	}
	return eng
}
