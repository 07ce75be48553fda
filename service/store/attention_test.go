package store_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
)

// TestListNeedsAttention: failed instances (with their node error's code) and running ones with an open task for
// a disabled or deleted user are listed newest first with their reason; a running one whose disabled user's task
// is decided, an ended one with such a task, another tenant's, and a healthy one are not; pages follow the cursor.
func TestListNeedsAttention(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		at := time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)
		mkUser(t, s, "ann")
		mkUser(t, s, "dora")
		mkUser(t, s, "gone")
		for _, u := range []string{"dora"} {
			if _, err := s.UpdateUser(ctx, model.DefaultTenant, u, func(u *model.User) error { u.Disabled = true; return nil }); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.DeleteUser(ctx, model.DefaultTenant, "gone"); err != nil {
			t.Fatal(err)
		}
		mk := func(id, tenant string, status model.InstanceStatus, tasks ...[2]string) { // tasks: assignee, status
			t.Helper()
			w := newWork(id, tenant, at)
			w.Instance.Status = status
			if status == model.StatusFailed {
				w.Instance.State.Error = &model.NodeFailure{Code: model.NodeErrNoApprover, NodeID: "lead", Message: "nobody decides lead"}
			}
			for i, tk := range tasks {
				w.NewTasks = append(w.NewTasks, &model.Task{ID: fmt.Sprintf("%s.t%d", id, i+1), TenantID: tenant, InstanceID: id, NodeID: "lead", NodeName: "Team lead",
					Assignee: tk[0], Status: model.TaskStatus(tk[1]), Kind: model.TaskKindApproval, Title: "t", Template: "t", Initiator: "alice", CreatedAt: at.Add(time.Duration(i) * time.Second)})
			}
			if err := s.CreateInstance(ctx, w); err != nil {
				t.Fatal(err)
			}
		}
		mk("i01-healthy", model.DefaultTenant, model.StatusRunning, [2]string{"ann", "pending"})
		mk("i02-failed", model.DefaultTenant, model.StatusFailed)
		mk("i03-disabled", model.DefaultTenant, model.StatusRunning, [2]string{"ann", "pending"}, [2]string{"dora", "pending"}, [2]string{"gone", "waiting"})
		mk("i04-deleted", model.DefaultTenant, model.StatusRunning, [2]string{"gone", "pending"})
		mk("i05-decided", model.DefaultTenant, model.StatusRunning, [2]string{"dora", "approved"}, [2]string{"ann", "pending"})
		mk("i06-ended", model.DefaultTenant, model.StatusCompleted, [2]string{"dora", "pending"})
		mk("i07-other", "other", model.StatusFailed)
		mk("i08-unknown", "other", model.StatusRunning, [2]string{"ann", "pending"}) // ann exists only in the default tenant

		items, next, err := s.ListNeedsAttention(ctx, model.DefaultTenant, model.Page{Limit: 50})
		if err != nil || next != "" {
			t.Fatal(next, err)
		}
		type row struct{ id, reason, code, tasks string }
		var got []row
		for _, it := range items {
			var ts []string
			for _, tk := range it.Tasks {
				ts = append(ts, tk.TaskID+":"+tk.Assignee+":"+tk.Reason+":"+tk.NodeName)
			}
			got = append(got, row{it.ID, it.Reason, it.ErrorCode, fmt.Sprint(ts)})
		}
		want := []row{
			{"i04-deleted", model.AttentionAssigneeDeleted, model.AttentionAssigneeDeleted, "[i04-deleted.t1:gone:assignee_deleted:Team lead]"},
			{"i03-disabled", model.AttentionAssigneeDisabled, model.AttentionAssigneeDisabled,
				"[i03-disabled.t2:dora:assignee_disabled:Team lead i03-disabled.t3:gone:assignee_deleted:Team lead]"},
			{"i02-failed", model.AttentionFailed, model.NodeErrNoApprover, "[]"},
		}
		if !slices.Equal(got, want) {
			t.Fatalf("needs attention =\n%v\nwant\n%v", got, want)
		}
		if e := items[2].Error; e == nil || e.NodeID != "lead" || e.Message != "nobody decides lead" {
			t.Fatalf("failed item's error = %+v", e)
		}
		if b, _ := json.Marshal(items[2]); !jsonHas(b, `"reason":"failed"`, `"error_code":"no_approver"`, `"template":"t"`) {
			t.Fatalf("item JSON = %s", b)
		}

		other, _, err := s.ListNeedsAttention(ctx, "other", model.Page{Limit: 50})
		if err != nil || len(other) != 2 || other[0].ID != "i08-unknown" || other[0].Reason != model.AttentionAssigneeDeleted || other[1].ID != "i07-other" {
			t.Fatalf("tenant other = %+v, %v", other, err)
		}

		// Pages of one.
		var ids []string
		cursor := ""
		for range 5 {
			page, nx, err := s.ListNeedsAttention(ctx, model.DefaultTenant, model.Page{Limit: 1, Cursor: cursor})
			if err != nil {
				t.Fatal(err)
			}
			for _, it := range page {
				ids = append(ids, it.ID)
			}
			if cursor = nx; cursor == "" {
				break
			}
		}
		if !slices.Equal(ids, []string{"i04-deleted", "i03-disabled", "i02-failed"}) {
			t.Fatalf("paged ids = %v", ids)
		}
	})
}

func jsonHas(b []byte, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(string(b), p) {
			return false
		}
	}
	return true
}
