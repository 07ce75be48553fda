package attachments_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/attachments"
	"github.com/halley-bpm/halley/service/clock"
	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
)

// png is the start of a PNG file: enough for the type to be sniffed.
var png = append([]byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"), bytes.Repeat([]byte{7}, 3000)...)

func code(err error) string {
	var e *model.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

func newService(t *testing.T, st *store.Store, storage, dir string, clk clock.Clock) *attachments.Service {
	t.Helper()
	s, err := attachments.New(st, attachments.Config{Storage: storage, Dir: dir, MaxSize: 64 << 10, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func read(t *testing.T, s *attachments.Service, a *model.Attachment) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := s.Write(context.Background(), a, &b); err != nil {
		t.Fatalf("read %s: %v", a.ID, err)
	}
	return b.Bytes()
}

// TestTwoReplicas uploads on one replica and reads on another that shares only the database (storage
// "database"), or the database and a mounted directory (storage "dir"); many uploads of the same bytes at once
// store them once.
func TestTwoReplicas(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		ctx := context.Background()
		for _, storage := range []string{model.AttachmentsInDatabase, model.AttachmentsInDir} {
			t.Run(storage, func(t *testing.T) {
				shared := t.TempDir()
				dirA, dirB := t.TempDir(), t.TempDir()
				if storage == model.AttachmentsInDir {
					dirA, dirB = shared, shared // the NAS mount both replicas reach
				}
				a := newService(t, st, storage, dirA, clock.Real{})
				b := newService(t, st, storage, dirB, clock.Real{})
				u := attachments.Uploader{TenantID: model.DefaultTenant, Username: "alice"}
				body := append(append([]byte{}, png...), storage...)
				var wg sync.WaitGroup
				got := make([]*model.Attachment, 8)
				errs := make([]error, 8)
				for i := range got {
					wg.Add(1)
					go func() {
						defer wg.Done()
						svc := a
						if i%2 == 1 {
							svc = b
						}
						got[i], errs[i] = svc.Upload(ctx, u, `C:\photos\leave "note".png`, bytes.NewReader(body))
					}()
				}
				wg.Wait()
				sum := sha256.Sum256(body)
				for i, x := range got {
					if errs[i] != nil {
						t.Fatalf("upload %d: %v", i, errs[i])
					}
					if x.SHA256 != hex.EncodeToString(sum[:]) || x.Size != int64(len(body)) || x.ContentType != "image/png" || x.Name != "leave note.png" {
						t.Fatalf("upload %d = %+v", i, x)
					}
					other := b
					if i%2 == 1 {
						other = a
					}
					fetched, err := other.Get(ctx, model.DefaultTenant, x.ID)
					if err != nil {
						t.Fatal(err)
					}
					if !bytes.Equal(read(t, other, fetched), body) {
						t.Fatalf("the other replica reads different bytes for %s", x.ID)
					}
				}
				if storage == model.AttachmentsInDatabase {
					var n int
					if err := st.DB().Raw("SELECT COUNT(*) FROM blobs WHERE sha256 = ?", got[0].SHA256).Scan(&n).Error; err != nil || n != 1 {
						t.Fatalf("blobs of the bytes = %d, %v; want 1", n, err)
					}
				} else if _, err := os.Stat(filepath.Join(shared, got[0].SHA256[:2], got[0].SHA256)); err != nil {
					t.Fatalf("file not in the shared dir: %v", err)
				}
			})
		}
	})
}

// TestUploadLimits: beyond MaxSize is 413 attachment_too_large and an empty file is refused; neither stores a row.
func TestUploadLimits(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		ctx := context.Background()
		s := newService(t, st, model.AttachmentsInDatabase, t.TempDir(), clock.Real{})
		u := attachments.Uploader{TenantID: model.DefaultTenant, Username: "alice"}
		if _, err := s.Upload(ctx, u, "big.bin", bytes.NewReader(make([]byte, 64<<10+1))); code(err) != "attachment_too_large" {
			t.Fatalf("too large: %v", err)
		}
		if _, err := s.Upload(ctx, u, "empty.txt", strings.NewReader("")); code(err) != "empty_file" {
			t.Fatalf("empty: %v", err)
		}
		if a, err := s.Upload(ctx, u, "exact.bin", bytes.NewReader(make([]byte, 64<<10))); err != nil || a.Size != 64<<10 {
			t.Fatalf("at the limit: %v %+v", err, a)
		}
		var n int
		if err := st.DB().Raw("SELECT COUNT(*) FROM attachments").Scan(&n).Error; err != nil || n != 1 {
			t.Fatalf("attachment rows = %d, %v; want only the one within the limit", n, err)
		}
	})
}

// TestUseAndRead: only the uploader (or an anonymous submitter of the same form) may put an attachment into a new
// request, anyone in an instance that uses it already may keep it there; readers are the uploader, admins and
// those who see a linked instance.
func TestUseAndRead(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		ctx := context.Background()
		s := newService(t, st, model.AttachmentsInDatabase, t.TempDir(), clock.Real{})
		alice := attachments.Uploader{TenantID: model.DefaultTenant, Username: "alice"}
		bob := attachments.Uploader{TenantID: model.DefaultTenant, Username: "bob"}
		anonLeave := attachments.Uploader{TenantID: model.DefaultTenant, FormKey: "leave"}
		a, err := s.Upload(ctx, alice, "a.txt", strings.NewReader("alice's"))
		if err != nil {
			t.Fatal(err)
		}
		anon, err := s.Upload(ctx, anonLeave, "b.txt", strings.NewReader("anonymous"))
		if err != nil {
			t.Fatal(err)
		}
		if err := s.CheckUse(ctx, alice, "", []string{a.ID}); err != nil {
			t.Fatalf("alice uses her upload: %v", err)
		}
		for _, c := range []struct {
			name string
			u    attachments.Uploader
			ids  []string
		}{
			{"bob takes alice's", bob, []string{a.ID}},
			{"alice takes an anonymous upload", alice, []string{anon.ID}},
			{"another form's anonymous submitter", attachments.Uploader{TenantID: model.DefaultTenant, FormKey: "expense"}, []string{anon.ID}},
			{"an unknown id", alice, []string{"att_00000000000000000000000000000000"}},
			{"another tenant", attachments.Uploader{TenantID: "other", Username: "alice"}, []string{a.ID}},
		} {
			if err := s.CheckUse(ctx, c.u, "", c.ids); code(err) != "unknown_attachment" {
				t.Errorf("%s: %v, want unknown_attachment", c.name, err)
			}
		}
		if err := s.CheckUse(ctx, anonLeave, "", []string{anon.ID}); err != nil {
			t.Fatalf("the form's anonymous submitter: %v", err)
		}
		see := func(visible ...string) func(string) bool {
			return func(id string) bool {
				for _, v := range visible {
					if v == id {
						return true
					}
				}
				return false
			}
		}
		bobP := &model.Principal{TenantID: model.DefaultTenant, Username: "bob"}
		if ok, err := s.MayRead(ctx, bobP, a, see("i-1")); err != nil || ok {
			t.Fatalf("bob reads an unlinked upload: %v %v", ok, err)
		}
		if err := s.Link(ctx, model.DefaultTenant, "i-1", []string{a.ID}); err != nil {
			t.Fatal(err)
		}
		if err := s.Link(ctx, model.DefaultTenant, "i-1", []string{a.ID}); err != nil {
			t.Fatalf("linking twice: %v", err)
		}
		if ok, _ := s.MayRead(ctx, bobP, a, see("i-1")); !ok {
			t.Fatal("bob sees i-1, which uses the file, yet may not read it")
		}
		if ok, _ := s.MayRead(ctx, bobP, a, see("i-2")); ok {
			t.Fatal("bob reads a file of an instance he does not see")
		}
		if ok, _ := s.MayRead(ctx, &model.Principal{TenantID: model.DefaultTenant, Username: "alice"}, a, see()); !ok {
			t.Fatal("the uploader may not read her file")
		}
		if ok, _ := s.MayRead(ctx, &model.Principal{TenantID: model.DefaultTenant, Username: "root", Roles: []string{model.RoleAdmin}}, anon, see()); !ok {
			t.Fatal("an admin may not read a file")
		}
		// Bob, deciding in i-1, may keep alice's file there (an unchanged form value), not put it elsewhere.
		if err := s.CheckUse(ctx, bob, "i-1", []string{a.ID}); err != nil {
			t.Fatalf("bob keeps a file of i-1: %v", err)
		}
		if err := s.CheckUse(ctx, bob, "i-2", []string{a.ID}); code(err) != "unknown_attachment" {
			t.Fatalf("bob moves alice's file to i-2: %v", err)
		}
	})
}

// TestPurge: a day after its upload an attachment no instance uses is deleted with its bytes, unless other
// attachments (or plugins) hold the same bytes; used ones and young ones stay.
func TestPurge(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		ctx := context.Background()
		for _, storage := range []string{model.AttachmentsInDatabase, model.AttachmentsInDir} {
			t.Run(storage, func(t *testing.T) {
				clk := clock.NewFake(time.Date(2026, 11, 28, 8, 0, 0, 0, time.UTC))
				st.SetNow(clk.Now)
				dir := t.TempDir()
				s := newService(t, st, storage, dir, clk)
				u := attachments.Uploader{TenantID: model.DefaultTenant, Username: "alice"}
				up := func(body string) *model.Attachment {
					a, err := s.Upload(ctx, u, "f.txt", strings.NewReader(body+storage))
					if err != nil {
						t.Fatal(err)
					}
					return a
				}
				unused, used, twinA, twinB := up("unused"), up("used"), up("twin"), up("twin")
				if err := s.Link(ctx, model.DefaultTenant, "i-1", []string{used.ID, twinB.ID}); err != nil {
					t.Fatal(err)
				}
				clk.Advance(attachments.UnusedFor - time.Minute)
				young := up("young")
				if n, err := s.Purge(ctx); err != nil || n != 0 {
					t.Fatalf("purge before a day: %d %v", n, err)
				}
				clk.Advance(2 * time.Minute)
				if n, err := s.Purge(ctx); err != nil || n != 2 {
					t.Fatalf("purge = %d %v; want the unused file and one twin", n, err)
				}
				for _, a := range []*model.Attachment{unused, twinA} {
					if _, err := s.Get(ctx, model.DefaultTenant, a.ID); code(err) != "attachment_not_found" {
						t.Fatalf("%s survived the purge: %v", a.ID, err)
					}
				}
				if s.Write(ctx, unused, &bytes.Buffer{}) == nil {
					t.Fatal("the bytes of the purged file are still there")
				}
				for _, a := range []*model.Attachment{used, twinB, young} {
					got, err := s.Get(ctx, model.DefaultTenant, a.ID)
					if err != nil {
						t.Fatalf("%s was purged: %v", a.ID, err)
					}
					if want := strings.TrimSuffix(string(read(t, s, got)), storage); !strings.HasPrefix(a.Name, "f") || want == "" {
						t.Fatalf("%s reads %q", a.ID, want)
					}
				}
			})
		}
	})
}

func TestRefs(t *testing.T) {
	id1, id2 := "att_0123456789abcdef0123456789abcdef", "att_ffffffffffffffffffffffffffffffff"
	got := attachments.Refs([]byte(fmt.Sprintf(`{"days":3,"photos":[{"id":%q,"name":"x"}],"deep":{"x":[%q, "att_short", %q]}}`, id2, id1, id2)), nil, []byte(`not json`))
	if strings.Join(got, ",") != id1+","+id2 {
		t.Fatalf("Refs = %v", got)
	}
}

func TestServingRules(t *testing.T) {
	for ct, want := range map[string][2]bool{ // risky, inline
		"text/html": {true, false}, "image/svg+xml": {true, false}, "application/xhtml+xml": {true, false}, "text/javascript": {true, false},
		"image/png": {false, true}, "application/pdf": {false, true}, "application/zip": {false, false}, "text/plain": {false, true},
	} {
		if attachments.Risky(ct) != want[0] || attachments.Inline(ct) != want[1] {
			t.Errorf("%s: risky %v inline %v, want %v", ct, attachments.Risky(ct), attachments.Inline(ct), want)
		}
	}
	if got := attachments.DetectType("a.html", []byte("<!doctype html><script>alert(1)</script>")); got != "text/html" {
		t.Errorf("html sniffed as %q", got)
	}
	if got := attachments.DetectType("report.docx", []byte("PK\x03\x04")); got != "application/zip" && !strings.Contains(got, "officedocument") {
		t.Errorf("docx = %q", got)
	}
	if got := attachments.DetectType("page.svg", []byte("hello")); got != "text/plain" {
		t.Errorf("a risky extension is not believed: %q", got)
	}
	if got := attachments.CleanName("../../etc/\x00passwd"); got != "passwd" {
		t.Errorf("CleanName = %q", got)
	}
}
