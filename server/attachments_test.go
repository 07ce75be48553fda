package server_test

import (
	"bytes"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"

	"github.com/halley-bpm/halley/server"
	"github.com/halley-bpm/halley/service/attachments"
	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
)

func withAttachments(t *testing.T, s *store.Store, max int64) func(*server.Deps) {
	return func(d *server.Deps) {
		a, err := attachments.New(s, attachments.Config{Dir: t.TempDir(), MaxSize: max})
		if err != nil {
			t.Fatal(err)
		}
		d.Attachments = a
	}
}

// attach uploads a file as the multipart field "file" to path with token ("" = anonymous).
func (e *env) attach(path, token, name string, body []byte) resp {
	e.t.Helper()
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	_ = mw.WriteField("note", "ignored")
	fw, _ := mw.CreateFormFile("file", name)
	_, _ = fw.Write(body)
	_ = mw.Close()
	req, _ := http.NewRequest("POST", e.url+path, &b)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	r := resp{Status: res.StatusCode, Body: raw, Header: res.Header}
	_ = json.Unmarshal(raw, &r.JSON)
	return r
}

// TestAttachmentsAPI walks API.md "Attachments": upload, limits, safe serving, who may read, use in a start form
// and in approve/reject comments, anonymous form uploads.
func TestAttachmentsAPI(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		e := newEnv(t, s, withAttachments(t, s, 32<<10))
		ann, bob, carol := e.mkUser("ann"), e.mkUser("bob"), e.mkUser("carol")
		form := M{"kind": "components", "fields": []any{M{"id": "f1", "type": "image", "label": "Photos", "field": "photos"}}}
		e.publish("leave", []any{start(M{"kind": "form", "form": form}), M{"id": "lead", "type": "approval", "approvers": M{"users": []string{"bob"}}},
			M{"id": "end", "type": "end"}}, []any{edge("start", "lead"), edge("lead", "end")})

		png := append([]byte("\x89PNG\r\n\x1a\n"), bytes.Repeat([]byte{1}, 100)...)
		up := e.attach("/api/v1/attachments", ann, "sick note.png", png)
		if up.Status != 201 || up.JSON["content_type"] != "image/png" || up.JSON["name"] != "sick note.png" || up.JSON["size"] != float64(len(png)) || len(up.JSON["sha256"].(string)) != 64 {
			t.Fatalf("upload: %d %s", up.Status, up.Body)
		}
		photo := up.JSON["id"].(string)

		if r := e.do("GET", "/api/v1/attachments", ann, nil, nil); r.Status != 200 || r.JSON["max_size"] != float64(32<<10) {
			t.Fatalf("settings: %d %s", r.Status, r.Body)
		}
		if r := e.do("GET", "/api/v1/forms/leave", ann, nil, nil); r.JSON["attachment_max_size"] != float64(32<<10) || r.JSON["key"] != "leave" {
			t.Fatalf("the form's limit: %s", r.Body)
		}

		// Limits and bad requests, with nothing stored.
		assertError(t, e.attach("/api/v1/attachments", ann, "big.bin", make([]byte, 32<<10+1)), 413, "attachment_too_large")
		assertError(t, e.attach("/api/v1/attachments", ann, "big.bin", make([]byte, 2<<20)), 413, "body_too_large") // refused on its Content-Length
		assertError(t, e.attach("/api/v1/attachments", ann, "empty.txt", nil), 400, "empty_file")
		assertError(t, e.do("POST", "/api/v1/attachments", ann, M{"file": "x"}, nil), 400, "missing_file")
		assertError(t, e.attach("/api/v1/attachments", "", "a.png", png), 401, "")
		if n := e.rowCount("attachments", "1 = 1"); n != 1 {
			t.Fatalf("%d attachment rows; want 1", n)
		}

		// Served safely: images inline, HTML never as a page.
		get := func(id, token string) resp { return e.do("GET", "/api/v1/attachments/"+id, token, nil, nil) }
		r := get(photo, ann)
		if r.Status != 200 || !bytes.Equal(r.Body, png) || r.Header.Get("Content-Type") != "image/png" || r.Header.Get("X-Content-Type-Options") != "nosniff" ||
			!strings.HasPrefix(r.Header.Get("Content-Disposition"), "inline") || !strings.Contains(r.Header.Get("Content-Security-Policy"), "sandbox") {
			t.Fatalf("get photo: %d %v", r.Status, r.Header)
		}
		html := e.attach("/api/v1/attachments", ann, "x.html", []byte("<!doctype html><script>alert(document.cookie)</script>")).JSON["id"].(string)
		r = get(html, ann)
		if r.Header.Get("Content-Type") != "application/octet-stream" || !strings.HasPrefix(r.Header.Get("Content-Disposition"), `attachment; filename=x.html`) {
			t.Fatalf("html served as %q, %q", r.Header.Get("Content-Type"), r.Header.Get("Content-Disposition"))
		}
		cn := e.attach("/api/v1/attachments", ann, "病假条.pdf", []byte("%PDF-1.4 ...")).JSON["id"].(string)
		if d := get(cn, ann).Header.Get("Content-Disposition"); d != "inline; filename*=utf-8''%E7%97%85%E5%81%87%E6%9D%A1.pdf" {
			t.Fatalf("Chinese name: %q", d)
		}
		if r := e.do("GET", "/api/v1/attachments/"+photo, ann, nil, map[string]string{"If-None-Match": get(photo, ann).Header.Get("ETag")}); r.Status != 304 || len(r.Body) != 0 {
			t.Fatalf("no ETag revalidation: %d", r.Status)
		}

		// Before it is used, only its uploader and admins read it.
		assertError(t, get(photo, bob), 403, "not_allowed")
		if get(photo, e.admin).Status != 200 {
			t.Fatal("an admin may not read an upload")
		}
		assertError(t, get("att_00000000000000000000000000000000", ann), 404, "attachment_not_found")
		assertError(t, get("../../etc/passwd", ann), 404, "")

		// Nobody uses someone else's upload; the refused start stores nothing.
		assertError(t, e.do("POST", "/api/v1/forms/leave/submit", carol, M{"photos": []any{M{"id": photo}}}, nil), 422, "unknown_attachment")
		if n := e.rowCount("instances", "1 = 1"); n != 0 {
			t.Fatalf("%d instances from a refused start", n)
		}
		r = e.do("POST", "/api/v1/forms/leave/submit", ann, M{"photos": []any{M{"id": photo, "name": "sick note.png", "size": len(png), "content_type": "image/png"}}}, nil)
		if r.Status != 201 {
			t.Fatalf("start with the photo: %d %s", r.Status, r.Body)
		}
		inst := r.JSON["id"].(string)
		if get(photo, bob).Status != 200 {
			t.Fatal("the approver may not read the request's photo")
		}
		assertError(t, get(photo, carol), 403, "not_allowed")

		// Bob approves with an attachment of his own: it is in the history and readable by ann.
		note := e.attach("/api/v1/attachments", bob, "handover.txt", []byte("hand over to Hana")).JSON["id"].(string)
		taskID := e.do("GET", "/api/v1/tasks?assignee=bob", bob, nil, nil).JSON["items"].([]any)[0].(M)["id"].(string)
		// A decision without attachments is not preceded by a read of the task: the step refuses what the read did.
		assertError(t, e.do("POST", "/api/v1/tasks/"+taskID+"/approve", carol, M{"comment": "mine now"}, nil), 403, "not_assignee")
		assertError(t, e.do("POST", "/api/v1/tasks/"+taskID+"/reject", carol, nil, nil), 403, "not_assignee")
		assertError(t, e.do("POST", "/api/v1/tasks/"+inst+".t999/approve", bob, M{"comment": "ok"}, nil), 404, "task_not_found")
		assertError(t, e.do("POST", "/api/v1/tasks/no-such-task/approve", bob, nil, nil), 404, "task_not_found")
		assertError(t, e.do("POST", "/api/v1/tasks/"+taskID+"/approve", carol, M{"attachments": []string{note}}, nil), 403, "not_allowed")
		assertError(t, e.do("POST", "/api/v1/tasks/"+taskID+"/approve", bob, M{"comment": "ok", "attachments": []string{html}}, nil), 422, "unknown_attachment")
		assertError(t, e.do("POST", "/api/v1/tasks/"+taskID+"/approve", bob, M{"comment": "ok", "attachments": []string{"<script>"}}, nil), 400, "invalid_attachments")
		if r := e.do("POST", "/api/v1/tasks/"+taskID+"/approve", bob, M{"comment": "ok", "attachments": []string{note}}, nil); r.Status != 200 {
			t.Fatalf("approve with an attachment: %d %s", r.Status, r.Body)
		}
		found := false
		for _, h := range e.historyItems(inst) {
			if h.Get("action").String() == "task.approved" && h.Get("data.attachments.0.id").String() == note && h.Get("data.attachments.0.name").String() == "handover.txt" {
				found = true
			}
		}
		if !found {
			t.Fatal("the approval's attachment is not in the history")
		}
		if r := get(note, ann); r.Status != 200 || r.Body == nil || r.Header.Get("Content-Type") != "text/plain; charset=utf-8" {
			t.Fatalf("the initiator reads the approver's attachment: %d %v", r.Status, r.Header)
		}
		if n := e.rowCount("attachment_links", "instance_id = ?", inst); n != 2 {
			t.Fatalf("%d links; want the photo and the note", n)
		}
	})
}

// TestFormAttachmentsAnonymous: an anonymous submitter uploads only for a form that allows them, and the upload
// serves that form's submission only.
func TestFormAttachmentsAnonymous(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		e := newEnv(t, s, withAttachments(t, s, 32<<10))
		ann := e.mkUser("ann")
		files := M{"kind": "components", "fields": []any{M{"id": "f1", "type": "file", "label": "Files", "field": "files"}}}
		end := M{"id": "end", "type": "end"}
		e.publish("open", []any{start(M{"kind": "form", "form": files}), end}, []any{edge("start", "end")})
		e.publish("other", []any{start(M{"kind": "form", "form": files}), end}, []any{edge("start", "end")})
		e.publish("staff", []any{start(M{"kind": "form", "form": files, "require_login": true}), end}, []any{edge("start", "end")})

		assertError(t, e.attach("/api/v1/forms/staff/attachments", "", "a.txt", []byte("x")), 401, "")
		assertError(t, e.attach("/api/v1/forms/nope/attachments", "", "a.txt", []byte("x")), 404, "")
		if r := e.attach("/api/v1/forms/staff/attachments", ann, "a.txt", []byte("x")); r.Status != 201 {
			t.Fatalf("a logged-in user uploads for a login form: %d %s", r.Status, r.Body)
		}
		r := e.attach("/api/v1/forms/open/attachments", "", "cv.pdf", []byte("%PDF-1.4 cv"))
		if r.Status != 201 {
			t.Fatalf("anonymous upload: %d %s", r.Status, r.Body)
		}
		id := r.JSON["id"].(string)
		assertError(t, e.do("POST", "/api/v1/forms/other/submit", "", M{"files": []string{id}}, nil), 422, "unknown_attachment")
		assertError(t, e.do("POST", "/api/v1/forms/open/submit", ann, M{"files": []string{id}}, nil), 422, "unknown_attachment")
		if r := e.do("POST", "/api/v1/forms/open/submit", "", M{"files": []string{id}}, nil); r.Status != 201 {
			t.Fatalf("anonymous submit with its upload: %d %s", r.Status, r.Body)
		}
		if n := e.rowCount("attachment_links", "attachment_id = ?", id); n != 1 {
			t.Fatalf("%d links; want 1", n)
		}
		if r := e.do("GET", "/api/v1/attachments/"+id, e.admin, nil, nil); r.Status != 200 || r.Header.Get("Content-Type") != "application/pdf" {
			t.Fatalf("admin reads the anonymous upload: %d", r.Status)
		}
	})
}
