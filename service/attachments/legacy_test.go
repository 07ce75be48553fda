package attachments_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/clock"
	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
)

func dataURL(typ string, b []byte) string {
	return "data:" + typ + ";base64," + base64.StdEncoding.EncodeToString(b)
}

func createInstance(t *testing.T, st *store.Store, id, initiator, doc string) {
	t.Helper()
	at := time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)
	w := &model.Work{Instance: &model.Instance{ID: id, TenantID: model.DefaultTenant, Template: "leave", Version: 1, Title: id, Status: model.StatusRunning,
		Initiator: initiator, Context: json.RawMessage(doc), CreatedAt: at, UpdatedAt: at}}
	if err := st.CreateInstance(context.Background(), w); err != nil {
		t.Fatal(err)
	}
}

func contextOf(t *testing.T, st *store.Store, id string) string {
	t.Helper()
	inst, _, err := st.GetInstance(context.Background(), model.DefaultTenant, id)
	if err != nil {
		t.Fatal(err)
	}
	return string(inst.Context)
}

// TestMigrateDataURLs moves the inline files of older requests into the attachments store, in batches: each
// becomes what an upload leaves in a file field, readable with the same bytes, linked to its instance, uploaded by
// the initiator; everything else of the context stays as it was (numbers to the last digit); what is no base64
// data: URL stays inline; a second run changes nothing.
func TestMigrateDataURLs(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		ctx := context.Background()
		for _, storage := range []string{model.AttachmentsInDatabase, model.AttachmentsInDir} {
			t.Run(storage, func(t *testing.T) {
				s := newService(t, st, storage, t.TempDir(), clock.NewFake(time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)))
				pfx := fmt.Sprintf("mig-%s-%d-", storage, time.Now().UnixNano())
				text := []byte("机票 receipt\n")
				// Instances: one with two inline files nested in a list and a JS URL that must stay, one without
				// files, and many with one file each, across several batches.
				rich := fmt.Sprintf(`{"big":12345678901234567,"who":"王 <b>","files":[{"name":"photo.png","size":%d,"type":"image/png","data_url":%q},`+
					`{"name":"../receipt.txt","size":%d,"type":"text/plain","data_url":%q},{"name":"x","data_url":"javascript:alert(1)"}],"n":{"deep":[1.50]}}`,
					len(png), dataURL("image/png", png), len(text), dataURL("text/plain", text))
				createInstance(t, st, pfx+"a-rich", "alice", rich)
				createInstance(t, st, pfx+"b-plain", "bob", `{"days":3}`)
				const many = 23
				for i := range many {
					createInstance(t, st, fmt.Sprintf("%sc-%02d", pfx, i), "carol", fmt.Sprintf(`{"i":%d,"f":[{"name":"n%d.txt","data_url":%q}]}`, i, i, dataURL("text/plain", []byte(fmt.Sprint("file ", i)))))
				}

				stats, err := s.MigrateDataURLs(ctx, st, 5, nil)
				if err != nil {
					t.Fatal(err)
				}
				// Other tests' instances may hold data URLs too (the database is shared by the storage subtests):
				// the counts are at least ours.
				if stats.Instances < 1+many || stats.Files < 2+many || stats.Skipped < 1 {
					t.Fatalf("stats %+v", stats)
				}

				var got struct {
					Big   json.Number `json:"big"`
					Who   string      `json:"who"`
					Files []map[string]any
					N     map[string]any `json:"n"`
				}
				after := contextOf(t, st, pfx+"a-rich")
				dec := json.NewDecoder(strings.NewReader(after))
				dec.UseNumber()
				if err := dec.Decode(&got); err != nil {
					t.Fatal(err)
				}
				if got.Big.String() != "12345678901234567" || got.Who != "王 <b>" || len(got.Files) != 3 {
					t.Fatalf("context after: %s", after)
				}
				if strings.Contains(after, "base64") {
					t.Fatalf("a data URL is left: %s", after)
				}
				if got.Files[2]["data_url"] != "javascript:alert(1)" {
					t.Fatalf("the javascript: value was not left as it was: %v", got.Files[2])
				}
				for i, want := range []struct {
					name, typ string
					bytes     []byte
				}{{"photo.png", "image/png", png}, {"receipt.txt", "text/plain; charset=utf-8", text}} {
					f := got.Files[i]
					id, _ := f["id"].(string)
					a, err := s.Get(ctx, model.DefaultTenant, id)
					if err != nil {
						t.Fatalf("file %d %v: %v", i, f, err)
					}
					if f["name"] != want.name || a.Name != want.name || a.UploadedBy != "alice" || string(read(t, s, a)) != string(want.bytes) {
						t.Fatalf("file %d: %v, stored %+v", i, f, a)
					}
					if f["content_type"] != a.ContentType || f["size"] != json.Number(fmt.Sprint(len(want.bytes))) || len(f) != 4 {
						t.Fatalf("file %d is not what an upload leaves: %v", i, f)
					}
					if !strings.HasPrefix(a.ContentType, strings.Split(want.typ, ";")[0]) {
						t.Fatalf("file %d type %q", i, a.ContentType)
					}
					links, err := st.AttachmentLinks(ctx, model.DefaultTenant, id)
					if err != nil || len(links) != 1 || links[0] != pfx+"a-rich" {
						t.Fatalf("links of %s: %v %v", id, links, err)
					}
				}
				if c := contextOf(t, st, pfx+"b-plain"); c != `{"days":3}` {
					t.Fatalf("a context without files changed: %s", c)
				}
				for i := range many {
					c := contextOf(t, st, fmt.Sprintf("%sc-%02d", pfx, i))
					if strings.Contains(c, "data_url") || !strings.Contains(c, `"att_`) || !strings.Contains(c, fmt.Sprintf(`"i":%d`, i)) {
						t.Fatalf("instance %d: %s", i, c)
					}
				}

				// Idempotent: nothing left to move; the contexts stay as they are.
				again, err := s.MigrateDataURLs(ctx, st, 5, nil)
				if err != nil {
					t.Fatal(err)
				}
				if again.Instances != 0 || again.Files != 0 {
					t.Fatalf("second run: %+v", again)
				}
				if c := contextOf(t, st, pfx+"a-rich"); c != after {
					t.Fatalf("the second run changed %s into %s", after, c)
				}
			})
		}
	})
}

// racing changes an instance's context just before the migration swaps it, once.
type racing struct {
	*store.Store
	id   string
	done bool
}

func (r *racing) SwapContext(ctx context.Context, id, old, next string) (bool, error) {
	if id == r.id && !r.done {
		r.done = true
		if ok, err := r.Store.SwapContext(ctx, id, old, strings.Replace(old, `"v":1`, `"v":2`, 1)); !ok || err != nil {
			return false, fmt.Errorf("the race did not happen: %v %v", ok, err)
		}
	}
	return r.Store.SwapContext(ctx, id, old, next)
}

// TestMigrateDataURLsChangedMeanwhile: a context that changes while it is migrated keeps the change; the next run
// migrates it.
func TestMigrateDataURLsChangedMeanwhile(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		ctx := context.Background()
		s := newService(t, st, model.AttachmentsInDatabase, t.TempDir(), clock.NewFake(time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)))
		id := fmt.Sprintf("race-%d", time.Now().UnixNano())
		createInstance(t, st, id, "alice", fmt.Sprintf(`{"v":1,"f":[{"name":"a.txt","data_url":%q}]}`, dataURL("text/plain", []byte("hello"))))
		src := &racing{Store: st, id: id}
		stats, err := s.MigrateDataURLs(ctx, src, 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		if stats.Changed < 1 {
			t.Fatalf("stats %+v", stats)
		}
		if c := contextOf(t, st, id); !strings.Contains(c, `"v":2`) || !strings.Contains(c, "data_url") {
			t.Fatalf("the change made meanwhile is lost: %s", c)
		}
		if _, err := s.MigrateDataURLs(ctx, src, 0, nil); err != nil {
			t.Fatal(err)
		}
		if c := contextOf(t, st, id); !strings.Contains(c, `"v":2`) || strings.Contains(c, "data_url") || !strings.Contains(c, `"att_`) {
			t.Fatalf("the next run did not migrate it: %s", c)
		}
	})
}
