package engine_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	"golang.org/x/crypto/bcrypt"

	"github.com/halley-bpm/halley/internal/testkit"
	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/engine"
	"github.com/halley-bpm/halley/service/engine/enginetest"
	"github.com/halley-bpm/halley/service/identity"
	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
	"github.com/halley-bpm/halley/service/template"
)

// chainDef is seeds/004's flow as `halley-bench steps` drives it: a start and four approval steps in a row.
const chainDef = `{"nodes":[{"id":"start","type":"start","trigger":{"kind":"manual"}},
	{"id":"a","type":"approval","approvers":{"users":["bob"]}},{"id":"b","type":"approval","approvers":{"users":["bob"]}},
	{"id":"c","type":"approval","approvers":{"users":["bob"]}},{"id":"d","type":"approval","approvers":{"users":["bob"]}},
	{"id":"end","type":"end"}],
	"edges":[{"from":"start","to":"a"},{"from":"a","to":"b"},{"from":"b","to":"c"},{"from":"c","to":"d"},{"from":"d","to":"end"}]}`

// BenchmarkApprovalFlow runs that flow in this process on SQLite, one step after another: a start and four
// approvals per iteration. Its allocations per flow are the engine's and the store's work for five steps, a
// figure the load of a shared machine does not move (docs/benchmarks.md).
func BenchmarkApprovalFlow(b *testing.B) {
	benchFlow(b, "sqlite://"+filepath.Join(b.TempDir(), "halley.db"))
}

// BenchmarkApprovalFlowMySQL is BenchmarkApprovalFlow on MySQL (HALLEY_TEST_MYSQL): the hot path on the MySQL
// driver, whose CPU profile is Halley's side of a step in production (docs/benchmarks.md).
func BenchmarkApprovalFlowMySQL(b *testing.B) {
	benchFlow(b, storetest.URL(b, store.MySQL))
}

func benchFlow(b *testing.B, url string) {
	ctx := context.Background()
	s, err := store.Open(ctx, store.Config{URL: url, Logger: testkit.Quiet()})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Migrate(ctx); err != nil {
		b.Fatal(err)
	}
	ids := identity.New(s, identity.Options{Secret: []byte("bench-secret-bench-secret-bench-secret"), BcryptCost: bcrypt.MinCost})
	for _, u := range []string{"ann", "bob"} {
		if _, err := ids.CreateUser(ctx, model.DefaultTenant, identity.CreateUserRequest{Username: u, Password: "pw-" + u + "-1234"}); err != nil {
			b.Fatal(err)
		}
	}
	tpl := template.New(s, template.Options{})
	if _, err := tpl.Create(ctx, admin, template.CreateRequest{Key: "chain", Definition: json.RawMessage(chainDef)}); err != nil {
		b.Fatal(err)
	}
	if _, err := tpl.Publish(ctx, admin, "chain"); err != nil {
		b.Fatal(err)
	}
	eng := enginetest.New(b, s, tpl, s, engine.Options{Logger: testkit.Quiet()})
	ann, bob := as("ann"), as("bob")
	last := ""
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		v, err := eng.Start(ctx, ann, engine.StartParams{Template: "chain"})
		if err != nil || len(v.Tasks) != 1 {
			b.Fatalf("start: %v, %v", v, err)
		}
		last = v.ID
		next := v.Tasks[0].ID
		for range 4 {
			d, err := eng.Approve(ctx, bob, next, "", nil)
			if err != nil {
				b.Fatal(err)
			}
			if len(d.NextTasks) > 0 {
				next = d.NextTasks[0].ID
			}
		}
	}
	b.StopTimer()
	if inst, _, err := s.GetInstance(ctx, model.DefaultTenant, last); err != nil || inst.Status != model.StatusCompleted {
		b.Fatalf("the last flow did not complete: %+v, %v", inst, err)
	}
}
