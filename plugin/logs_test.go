package plugin_test

import (
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/plugin"
)

func TestLogStoreWrite(t *testing.T) {
	s := &plugin.LogStore{Dir: t.TempDir()}
	job := plugin.Job{RunID: "0190a1b2-run", Attempt: 1,
		Spec:  plugin.Spec{Name: "grant-table", Version: 3, Runtime: plugin.RuntimePython},
		Input: plugin.Input{InstanceID: "inst-9", NodeID: "grant", Phase: "after"}}
	// 23:30 in Shanghai is still the previous day in UTC: folders are UTC days.
	started := time.Date(2024, 5, 2, 7, 30, 0, 0, time.FixedZone("CST", 8*3600))
	res := plugin.Result{ExitCode: 3, Stdout: []byte("partial"), Stderr: []byte("boom\n"), StderrTruncated: true,
		StartedAt: started, EndedAt: started.Add(1500 * time.Millisecond), Err: errors.New("exited with code 3")}

	p, err := s.WriteFile(job, res)
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(s.Dir, "2024-05-01", "grant-table", "0190a1b2-run.log")
	if p != want {
		t.Errorf("path %s, want %s", p, want)
	}
	job.Attempt = 2
	res2 := plugin.Result{ExitCode: 0, Stdout: []byte(`{"context":{}}`), StartedAt: started.Add(time.Minute),
		EndedAt: started.Add(time.Minute + time.Second), Output: &plugin.Output{}}
	if _, err := s.WriteFile(job, res2); err != nil {
		t.Fatal(err)
	}

	b, err := s.Read(started, "grant-table", "0190a1b2-run")
	if err != nil {
		t.Fatal(err)
	}
	log := string(b)
	for _, part := range []string{
		"=== run 0190a1b2-run attempt 1 ===", "plugin:      grant-table v3 (python)", "instance:    inst-9",
		"node:        grant", "started_at:  2024-05-01T23:30:00Z", "ended_at:    2024-05-01T23:30:01.5Z",
		"duration:    1.5s", "status:      failed", "exit_code:   3", "error:       exited with code 3",
		"--- stdout (7 bytes) ---\npartial\n", "--- stderr (5 bytes, truncated) ---\nboom\n",
		"=== run 0190a1b2-run attempt 2 ===", "status:      succeeded",
	} {
		if !strings.Contains(log, part) {
			t.Errorf("log lacks %q:\n%s", part, log)
		}
	}
	if strings.Index(log, "attempt 1") > strings.Index(log, "attempt 2") {
		t.Error("attempts out of order")
	}

	if _, err := s.Read(started, "grant-table", "other-run"); !model.IsKind(err, model.ENOTFOUND) {
		t.Errorf("missing log: %v, want ENOTFOUND", err)
	}
	for _, bad := range []struct{ plugin, run string }{{"../etc", "r"}, {"ok", "../../x"}, {"ok", "a/b"}, {"ok", ""}} {
		if _, err := s.Path(started, bad.plugin, bad.run); !model.IsKind(err, model.EINVALID) {
			t.Errorf("Path(%q, %q) = %v, want EINVALID", bad.plugin, bad.run, err)
		}
	}
}

func TestLogStorePurge(t *testing.T) {
	s := &plugin.LogStore{Dir: t.TempDir()}
	for i, day := range []string{"2024-01-01", "2024-01-02", "2024-01-03", "2024-01-04"} {
		d, _ := time.Parse("2006-01-02", day)
		job := plugin.Job{RunID: "run-" + day, Spec: plugin.Spec{Name: "p"}}
		if _, err := s.WriteFile(job, plugin.Result{StartedAt: d.Add(time.Duration(i) * time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	// Things that are not day folders are never touched.
	if err := os.MkdirAll(filepath.Join(s.Dir, "not-a-date"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(s.Dir, "2000-01-01"), []byte("a file"), 0o644); err != nil {
		t.Fatal(err)
	}

	removed, err := s.Purge(time.Date(2024, 1, 3, 12, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	if removed != 2 {
		t.Errorf("removed %d, want 2", removed)
	}
	entries, _ := os.ReadDir(s.Dir)
	var left []string
	for _, e := range entries {
		left = append(left, e.Name())
	}
	sort.Strings(left)
	want := []string{"2000-01-01", "2024-01-03", "2024-01-04", "not-a-date"}
	if strings.Join(left, ",") != strings.Join(want, ",") {
		t.Errorf("left %v, want %v", left, want)
	}

	if n, err := (&plugin.LogStore{Dir: filepath.Join(s.Dir, "missing")}).Purge(time.Now()); n != 0 || err != nil {
		t.Errorf("purge of a missing dir: %d, %v", n, err)
	}
}
