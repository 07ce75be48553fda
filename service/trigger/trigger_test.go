package trigger_test

import (
	"strings"
	"testing"

	"github.com/halley-bpm/halley/service/engine"
	"github.com/halley-bpm/halley/service/engine/enginetest"
	"github.com/halley-bpm/halley/service/scheduler"
	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
	"github.com/halley-bpm/halley/service/template"
	"github.com/halley-bpm/halley/service/trigger"
)

// TestNewNamesTheMissingDependency: the publisher needs a store and a scheduler, the service its four
// dependencies; a missing one is an error naming it, not a nil at the first crontab fire.
func TestNewNamesTheMissingDependency(t *testing.T) {
	s := storetest.Open(t, store.SQLite)
	sched := scheduler.NewMemory(scheduler.Options{})
	defer sched.Close()
	if _, err := trigger.NewPublisher(nil, sched, trigger.Options{}); err == nil {
		t.Error("NewPublisher accepted no store")
	}
	if _, err := trigger.NewPublisher(s, nil, trigger.Options{}); err == nil {
		t.Error("NewPublisher accepted no scheduler")
	}
	pub, err := trigger.NewPublisher(s, sched, trigger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tpl := template.New(s, template.Options{Publishers: []template.Publisher{pub}})
	eng := enginetest.New(t, s, tpl, s, engine.Options{})
	full := func() trigger.Deps { return trigger.Deps{Store: s, Templates: tpl, Engine: eng, Publisher: pub} }
	if _, err := trigger.New(full(), trigger.Options{}); err != nil {
		t.Fatalf("complete deps: %v", err)
	}
	for name, drop := range map[string]func(*trigger.Deps){
		"Store":     func(d *trigger.Deps) { d.Store = nil },
		"Templates": func(d *trigger.Deps) { d.Templates = nil },
		"Engine":    func(d *trigger.Deps) { d.Engine = nil },
		"Publisher": func(d *trigger.Deps) { d.Publisher = nil },
	} {
		d := full()
		drop(&d)
		if svc, err := trigger.New(d, trigger.Options{}); err == nil || svc != nil || !strings.Contains(err.Error(), name) {
			t.Errorf("without %s: New = %v, %v; want an error naming it", name, svc, err)
		}
	}
}
