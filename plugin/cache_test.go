package plugin_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/plugin"
	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
)

func shaOf(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func storeVersion(t *testing.T, s *store.Store, name string, version int, content []byte) *model.Plugin {
	t.Helper()
	p := &model.Plugin{TenantID: model.DefaultTenant, Name: name, Version: version, Runtime: "python", Timeout: time.Second, SHA256: shaOf(content),
		Size: int64(len(content)), UploadedBy: "admin"}
	if err := s.CreatePlugin(context.Background(), p, bytes.NewReader(content)); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestCacheFetchesAndChecks: a replica's cache fetches a file from the database on first use, hashes it, and
// serves a changed or damaged local copy never: it fetches the file again. A stored file that does not match its
// hash is refused, and nothing is left in the cache.
func TestCacheFetchesAndChecks(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		content := []byte("#!/bin/sh\necho '{}'\n" + strings.Repeat("# padding\n", 200_000)) // 2 MB: several chunks
		p := storeVersion(t, s, "shell", 1, content)
		c, err := plugin.NewCache(filepath.Join(t.TempDir(), "sha256"), s)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		paths := make([]string, 8)
		errs := make([]error, 8)
		for i := range paths {
			wg.Add(1)
			go func() { defer wg.Done(); paths[i], errs[i] = c.Path(ctx, p.SHA256) }()
		}
		wg.Wait()
		for i := range paths {
			if errs[i] != nil || paths[i] != filepath.Join(c.Dir(), p.SHA256) {
				t.Fatalf("Path = %q, %v", paths[i], errs[i])
			}
		}
		got, _ := os.ReadFile(paths[0])
		fi, _ := os.Stat(paths[0])
		if !bytes.Equal(got, content) || fi.Mode().Perm()&0o100 == 0 {
			t.Fatalf("cached file: %d bytes (want %d), mode %v", len(got), len(content), fi.Mode())
		}
		if n := len(listFiles(t, c.Dir())); n != 1 {
			t.Fatalf("%d files in the cache, want 1 (no temporary files left)", n)
		}

		// Someone changes the cached copy: the next use notices and fetches it again.
		if err := os.WriteFile(paths[0], []byte("#!/bin/sh\nrm -rf /\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Path(ctx, p.SHA256); err != nil {
			t.Fatal(err)
		}
		if got, _ := os.ReadFile(paths[0]); !bytes.Equal(got, content) {
			t.Fatal("a changed cached file was used as it was")
		}
		// A new process finds a damaged copy from before: it is checked on first use and replaced.
		if err := os.WriteFile(paths[0], bytes.Repeat([]byte("x"), len(content)), 0o755); err != nil {
			t.Fatal(err)
		}
		c2, _ := plugin.NewCache(c.Dir(), s)
		if _, err := c2.Path(ctx, p.SHA256); err != nil {
			t.Fatal(err)
		}
		if got, _ := os.ReadFile(paths[0]); !bytes.Equal(got, content) {
			t.Fatal("a damaged file from an earlier run was used")
		}

		// A stored file damaged in the database (same length, other bytes) is refused.
		if err := s.DB().Exec("UPDATE blob_chunks SET data = ? WHERE sha256 = ? AND seq = 1", bytes.Repeat([]byte("z"), len(content)-store.BlobChunkSize), p.SHA256).Error; err != nil {
			t.Fatal(err)
		}
		c3, _ := plugin.NewCache(filepath.Join(t.TempDir(), "fresh"), s)
		if _, err := c3.Path(ctx, p.SHA256); err == nil || !strings.Contains(err.Error(), "refusing to run it") {
			t.Fatalf("a damaged stored file: %v", err)
		}
		if n := len(listFiles(t, c3.Dir())); n != 0 {
			t.Fatalf("%d files left in the cache after a refused fetch", n)
		}
		if _, err := c3.Path(ctx, shaOf([]byte("never stored"))); !model.IsKind(err, model.ENOTFOUND) {
			t.Fatalf("a file stored nowhere: %v", err)
		}
		if _, err := c3.Path(ctx, "../../etc/passwd"); !model.IsKind(err, model.EINVALID) {
			t.Fatalf("a bad hash: %v", err)
		}
	})
}

// TestImportLegacy: plugin files of an earlier release (on this replica's disk, by name/version/sha256) go into
// the database at start; a damaged or missing one is reported, not imported.
func TestImportLegacy(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		dir := filepath.Join(t.TempDir(), "plugins")
		fs, err := plugin.NewFileStore(dir)
		if err != nil {
			t.Fatal(err)
		}
		row := func(name string, content []byte) {
			if err := s.DB().Exec("INSERT INTO plugins (tenant_id, name, version, runtime, timeout_ms, sha256, size, uploaded_by, created_at) VALUES ('default', ?, 1, 'python', 1000, ?, ?, 'admin', ?)",
				name, shaOf(content), len(content), time.Now().UTC()).Error; err != nil {
				t.Fatal(err)
			}
		}
		good, damaged := []byte("print('{}')\n"), []byte("print('{\"x\":1}')\n")
		for name, c := range map[string][]byte{"good": good, "damaged": damaged} {
			if _, err := fs.Save(name, 1, bytes.NewReader(c), 0); err != nil {
				t.Fatal(err)
			}
			row(name, c)
		}
		if err := os.WriteFile(filepath.Join(dir, "damaged", "1", shaOf(damaged)), []byte("print('tampered')\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		row("elsewhere", []byte("print('on another replica')\n"))

		imported, missing, err := plugin.ImportLegacy(ctx, dir, s)
		if err != nil || imported != 1 || len(missing) != 2 {
			t.Fatalf("import = %d, %v, %v; want 1 imported, 2 missing", imported, missing, err)
		}
		if ok, _ := s.HasBlob(ctx, shaOf(good)); !ok {
			t.Fatal("the good file was not imported")
		}
		if ok, _ := s.HasBlob(ctx, shaOf(damaged)); ok {
			t.Fatal("a damaged file was imported")
		}
		if imported, missing, _ := plugin.ImportLegacy(ctx, dir, s); imported != 0 || len(missing) != 2 {
			t.Fatalf("a second import: %d, %v", imported, missing)
		}
	})
}

// TestNewCacheAndDBLogValidate: the cache needs a directory and a source, the run log a store.
func TestNewCacheAndDBLogValidate(t *testing.T) {
	s := storetest.Open(t, store.SQLite)
	if _, err := plugin.NewCache("", s); err == nil || !strings.Contains(err.Error(), "needs a directory") {
		t.Errorf("no directory: %v", err)
	}
	if _, err := plugin.NewCache(t.TempDir(), nil); err == nil || !strings.Contains(err.Error(), "needs a source") {
		t.Errorf("no source: %v", err)
	}
	if _, err := plugin.NewDBLog(nil); err == nil || !strings.Contains(err.Error(), "needs a store") {
		t.Errorf("no store: %v", err)
	}
}

// TestDBLog: every attempt's record goes into the database under the run's tenant, in attempt order, also when
// the executor's context is already cancelled (a shutdown right after the run ended).
func TestDBLog(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		l, err := plugin.NewDBLog(s)
		if err != nil {
			t.Fatal(err)
		}
		started := time.Date(2026, 11, 25, 8, 0, 0, 0, time.UTC)
		job := plugin.Job{RunID: "inst-1.r1", TenantID: "acme", Attempt: 1, Spec: plugin.Spec{Name: "grant", Version: 2, Runtime: plugin.RuntimePython},
			Input: plugin.Input{InstanceID: "inst-1", NodeID: "n"}}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := l.Write(ctx, job, plugin.Result{ExitCode: 1, Stderr: []byte("boom"), StartedAt: started, EndedAt: started.Add(time.Second)}); err != nil {
			t.Fatal(err)
		}
		job.Attempt = 2
		if err := l.Write(context.Background(), job, plugin.Result{ExitCode: 0, Stdout: []byte("{}"), Output: &plugin.Output{}, StartedAt: started.Add(time.Minute),
			EndedAt: started.Add(time.Minute + time.Second)}); err != nil {
			t.Fatal(err)
		}
		logs, err := s.RunLogs(context.Background(), "acme", "inst-1.r1")
		if err != nil || len(logs) != 2 || logs[0].Attempt != 1 || logs[1].Attempt != 2 || logs[0].Plugin != "grant" || logs[0].InstanceID != "inst-1" ||
			!strings.Contains(logs[0].Record, "=== run inst-1.r1 attempt 1 ===") || !strings.Contains(logs[0].Record, "boom") {
			t.Fatalf("logs = %+v, %v", logs, err)
		}
		if _, err := s.RunLogs(context.Background(), model.DefaultTenant, "inst-1.r1"); !model.IsKind(err, model.ENOTFOUND) {
			t.Fatalf("another tenant reads the log: %v", err)
		}
	})
}
