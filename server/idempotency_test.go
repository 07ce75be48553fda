package server_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
)

// A request whose process dies after its work committed but before its answer was stored leaves its
// Idempotency-Key in flight. These tests put the key in that state (and in "died before committing") directly in
// the database, then retry as a client would.

// lose makes the stored answer of a key vanish, as if its process had died before storing it, age ago.
func lose(t *testing.T, s *store.Store, user, key string, age time.Duration) {
	t.Helper()
	res := s.DB().Exec("UPDATE idempotency_keys SET status_code = 0, body = '', created_at = ? WHERE username = ? AND idem_key = ?",
		time.Now().UTC().Add(-age), user, key)
	if res.Error != nil || res.RowsAffected != 1 {
		t.Fatalf("lose %s/%s: %v (%d rows)", user, key, res.Error, res.RowsAffected)
	}
}

// requestHash is the hash the middleware keeps of a JSON POST.
func requestHash(path string, body any) string {
	b, _ := json.Marshal(body)
	h := sha256.Sum256(append([]byte("POST "+path+"\n"), b...))
	return hex.EncodeToString(h[:])
}

func (e *env) countRows(q string, args ...any) int64 {
	e.t.Helper()
	var n int64
	if err := e.store.DB().Raw(q, args...).Scan(&n).Error; err != nil {
		e.t.Fatal(err)
	}
	return n
}

func TestIdempotencyAfterACrash(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		e := newEnv(t, s, nil)
		bob := e.mkUser("bob")
		e.mkUser("carol")
		approver := M{"users": []string{"bob"}}
		e.publish("crash", []any{start(M{"kind": "manual"}), M{"id": "a", "type": "approval", "approvers": approver},
			M{"id": "b", "type": "approval", "approvers": approver}, M{"id": "end", "type": "end"}},
			[]any{edge("start", "a"), edge("a", "b"), edge("b", "end")})
		key := func(k string) map[string]string { return map[string]string{"Idempotency-Key": k} }

		// A start that committed, whose answer was lost: 409 while the key is within its lease, then the instance.
		body := M{"template": "crash", "correlation_id": "c1"}
		first := e.do("POST", "/api/v1/instances", bob, body, key("start-1"))
		if first.Status != 201 {
			t.Fatalf("start: %d %s", first.Status, first.Body)
		}
		id := first.JSON["id"].(string)
		lose(t, s, "bob", "start-1", 0)
		assertError(t, e.do("POST", "/api/v1/instances", bob, body, key("start-1")), 409, "idempotency_in_progress")
		lose(t, s, "bob", "start-1", 2*time.Minute)
		r := e.do("POST", "/api/v1/instances", bob, body, key("start-1"))
		if r.Status != 201 || r.JSON["id"] != id || r.JSON["status"] != "running" || r.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("retry of a committed start: %d %s", r.Status, r.Body)
		}
		if tasks := r.JSON["tasks"].([]any); len(tasks) != 1 || tasks[0].(M)["node_id"] != "a" {
			t.Fatalf("recovered start answer has tasks %v", tasks)
		}
		again := e.do("POST", "/api/v1/instances", bob, body, key("start-1"))
		if again.Status != 201 || !bytes.Equal(again.Body, r.Body) {
			t.Fatalf("the recovered answer is stored and replayed: %d %s", again.Status, again.Body)
		}
		if n := e.countRows("SELECT COUNT(*) FROM instances WHERE correlation_id = 'c1'"); n != 1 {
			t.Fatalf("key start-1 made %d instances", n)
		}

		// A start whose process died before it committed: after the lease the retry takes the key over and runs.
		body2 := M{"template": "crash", "correlation_id": "c2"}
		if err := s.DB().Exec("INSERT INTO idempotency_keys (tenant_id, username, idem_key, request_hash, status_code, body, created_at) VALUES (?, ?, ?, ?, 0, '', ?)",
			"default", "bob", "start-2", requestHash("/api/v1/instances", body2), time.Now().UTC().Add(-2*time.Minute)).Error; err != nil {
			t.Fatal(err)
		}
		r = e.do("POST", "/api/v1/instances", bob, body2, key("start-2"))
		if r.Status != 201 || r.Header.Get("Idempotent-Replayed") != "" {
			t.Fatalf("retry of a start that committed nothing: %d %s", r.Status, r.Body)
		}
		if n := e.countRows("SELECT COUNT(*) FROM instances WHERE correlation_id = 'c2'"); n != 1 {
			t.Fatalf("key start-2 made %d instances", n)
		}
		if n := e.countRows("SELECT COUNT(*) FROM idempotency_commits WHERE idem_key = 'start-2' AND instance_id = ?", r.JSON["id"]); n != 1 {
			t.Fatalf("the start's commit of its key: %d rows", n)
		}

		// An approval that committed, whose answer was lost: the retry answers the decided task and next_tasks.
		_, open := e.tasksOf(id)
		ta := open["a/bob"]
		if r = e.do("POST", "/api/v1/tasks/"+ta+"/approve", bob, M{"comment": "ok"}, key("approve-a")); r.Status != 200 {
			t.Fatalf("approve: %d %s", r.Status, r.Body)
		}
		lose(t, s, "bob", "approve-a", 2*time.Minute)
		r = e.do("POST", "/api/v1/tasks/"+ta+"/approve", bob, M{"comment": "ok"}, key("approve-a"))
		if r.Status != 200 || r.JSON["id"] != ta || r.JSON["status"] != "approved" || r.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("retry of a committed approval: %d %s", r.Status, r.Body)
		}
		next := r.JSON["next_tasks"].([]any)
		if len(next) != 1 || next[0].(M)["node_id"] != "b" {
			t.Fatalf("recovered next_tasks = %v", next)
		}
		if n := countOf(e.history(id), "task.approved:a"); n != 1 {
			t.Fatalf("%d approvals of a in the history", n)
		}
		tb := next[0].(M)["id"].(string)

		// The fence: a key whose work another request committed cannot commit again, even with a fresh claim.
		// The retry is told so (nothing changes), and the one after it gets that work's result.
		if err := s.DB().Exec("INSERT INTO idempotency_commits (tenant_id, username, idem_key, instance_id, created_at) VALUES ('default', 'bob', 'approve-b', ?, ?)",
			id, time.Now().UTC()).Error; err != nil {
			t.Fatal(err)
		}
		assertError(t, e.do("POST", "/api/v1/tasks/"+tb+"/approve", bob, nil, key("approve-b")), 409, "idempotency_committed")
		if got := e.do("GET", "/api/v1/tasks/"+tb, bob, nil, nil); got.JSON["status"] != "pending" {
			t.Fatalf("a fenced approval changed the task: %s", got.Body)
		}
		if r = e.do("POST", "/api/v1/tasks/"+tb+"/approve", bob, nil, key("approve-b")); r.Status != 200 || r.JSON["id"] != tb || r.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("retry after the fence: %d %s", r.Status, r.Body)
		}

		// A route whose answer cannot be rebuilt says the work was done, and where.
		if r = e.do("POST", "/api/v1/tasks/"+tb+"/transfer", bob, M{"to": "carol"}, key("transfer-b")); r.Status != 200 {
			t.Fatalf("transfer: %d %s", r.Status, r.Body)
		}
		lose(t, s, "bob", "transfer-b", 2*time.Minute)
		r = e.do("POST", "/api/v1/tasks/"+tb+"/transfer", bob, M{"to": "carol"}, key("transfer-b"))
		assertError(t, r, 409, "idempotency_response_lost")
		if d := r.JSON["error"].(M)["details"].(M); d["instance_id"] != id {
			t.Fatalf("response_lost details = %v", d)
		}

		// A route that changes no instance cannot tell whether it took effect.
		user := M{"username": "dora", "password": "pw-dora-1234"}
		if r = e.do("POST", "/api/v1/users", e.admin, user, key("user-dora")); r.Status != 201 {
			t.Fatalf("create user: %d %s", r.Status, r.Body)
		}
		lose(t, s, "admin", "user-dora", 2*time.Minute)
		assertError(t, e.do("POST", "/api/v1/users", e.admin, user, key("user-dora")), 409, "idempotency_outcome_unknown")
	})
}

// TestIdempotencyFenceUnderLoad runs approvals with keys on many instances at once (so that, on MySQL, they share
// group-commit transactions); one key's work was committed already. That approval alone fails; the others pass.
func TestIdempotencyFenceUnderLoad(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		e := newEnv(t, s, nil)
		bob := e.mkUser("bob")
		e.publish("fence", []any{start(M{"kind": "manual"}), M{"id": "a", "type": "approval", "approvers": M{"users": []string{"bob"}}},
			M{"id": "end", "type": "end"}}, []any{edge("start", "a"), edge("a", "end")})
		const n = 24
		tasks := make([]string, n)
		for i := range tasks {
			r := e.do("POST", "/api/v1/instances", bob, M{"template": "fence"}, nil)
			if r.Status != 201 {
				t.Fatalf("start: %s", r.Body)
			}
			tasks[i] = r.JSON["tasks"].([]any)[0].(M)["id"].(string)
		}
		const fenced = 7
		if err := s.DB().Exec("INSERT INTO idempotency_commits (tenant_id, username, idem_key, instance_id, created_at) VALUES ('default', 'bob', 'k7', 'elsewhere', ?)",
			time.Now().UTC()).Error; err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		got := make([]resp, n)
		for i := range tasks {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got[i] = e.do("POST", "/api/v1/tasks/"+tasks[i]+"/approve", bob, nil, map[string]string{"Idempotency-Key": fmt.Sprintf("k%d", i)})
			}()
		}
		wg.Wait()
		for i, r := range got {
			want := 200
			if i == fenced {
				want = 409
			}
			if r.Status != want {
				t.Fatalf("approval %d: %d %s", i, r.Status, r.Body)
			}
		}
		if c := got[fenced].code(); c != "idempotency_committed" {
			t.Fatalf("fenced approval: %s", got[fenced].Body)
		}
		if n := e.countRows("SELECT COUNT(*) FROM tasks WHERE id = ? AND status = 'pending'", tasks[fenced]); n != 1 {
			t.Fatal("the fenced approval changed its task")
		}
		if c := e.countRows("SELECT COUNT(*) FROM idempotency_commits WHERE username = 'bob'"); c != n {
			t.Fatalf("%d commit records, want %d", c, n)
		}
	})
}
