package plugin_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/plugin"
)

func TestValidName(t *testing.T) {
	cases := []struct {
		name string
		ok   bool
	}{
		{"create-cache", true},
		{"a", true},
		{"grant-table2", true},
		{strings.Repeat("a", 64), true},
		{strings.Repeat("a", 65), false},
		{"", false},
		{".", false},
		{"..", false},
		{"../x", false},
		{"a/b", false},
		{"/etc", false},
		{"A", false},
		{"Create", false},
		{"1st", false},
		{"-x", false},
		{"a_b", false},
		{"a.py", false},
		{"a b", false},
		{"a\x00", false},
	}
	for _, tc := range cases {
		err := plugin.ValidName(tc.name)
		if (err == nil) != tc.ok {
			t.Errorf("ValidName(%q) = %v, want ok=%v", tc.name, err, tc.ok)
		}
		if err != nil && !model.IsKind(err, model.EINVALID) {
			t.Errorf("ValidName(%q) error kind %s, want EINVALID", tc.name, model.ErrorKind(err))
		}
	}
}

func newFileStore(t *testing.T) *plugin.FileStore {
	t.Helper()
	s, err := plugin.NewFileStore(filepath.Join(t.TempDir(), "plugins"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// listFiles returns every regular file under dir, relative to it.
func listFiles(t *testing.T, dir string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			files = append(files, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func TestFileStoreSave(t *testing.T) {
	s := newFileStore(t)
	v1 := []byte("print('{\"context\":{}}')\n")
	v2 := []byte("print('{\"context\":{\"v\":2}}')\n")

	got1, err := s.Save("grant-table", 1, bytes.NewReader(v1), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	got2, err := s.Save("grant-table", 2, bytes.NewReader(v2), 1<<20)
	if err != nil {
		t.Fatal(err)
	}

	for i, tc := range []struct {
		got     plugin.StoredFile
		content []byte
		version string
	}{{got1, v1, "1"}, {got2, v2, "2"}} {
		sum := sha256.Sum256(tc.content)
		wantSHA := hex.EncodeToString(sum[:])
		if tc.got.SHA256 != wantSHA || tc.got.Size != int64(len(tc.content)) {
			t.Errorf("v%d: sha %s size %d, want %s %d", i+1, tc.got.SHA256, tc.got.Size, wantSHA, len(tc.content))
		}
		wantPath := filepath.Join(s.Dir, "grant-table", tc.version, wantSHA)
		if tc.got.Path != wantPath {
			t.Errorf("v%d: path %s, want %s", i+1, tc.got.Path, wantPath)
		}
		onDisk, err := os.ReadFile(tc.got.Path)
		if err != nil || !bytes.Equal(onDisk, tc.content) {
			t.Errorf("v%d: on disk %q (%v), want %q", i+1, onDisk, err, tc.content)
		}
		fi, err := os.Stat(tc.got.Path)
		if err != nil || fi.Mode().Perm() != 0o755 {
			t.Errorf("v%d: mode %v (%v), want 0755", i+1, fi.Mode().Perm(), err)
		}
		p, err := s.Path("grant-table", i+1, tc.got.SHA256)
		if err != nil || p != tc.got.Path {
			t.Errorf("v%d: Path = %s, %v", i+1, p, err)
		}
		f, err := s.Open("grant-table", i+1, tc.got.SHA256)
		if err != nil {
			t.Fatal(err)
		}
		read, _ := io.ReadAll(f)
		f.Close()
		if !bytes.Equal(read, tc.content) {
			t.Errorf("v%d: Open read %q", i+1, read)
		}
	}
	if got1.Path == got2.Path || filepath.Dir(got1.Path) == filepath.Dir(got2.Path) {
		t.Errorf("versions share a folder: %s, %s", got1.Path, got2.Path)
	}
	if files := listFiles(t, s.Dir); len(files) != 2 {
		t.Errorf("store holds %v, want exactly the two versions (no temp files)", files)
	}
}

func TestFileStoreSizeLimit(t *testing.T) {
	s := newFileStore(t)
	_, err := s.Save("big", 1, strings.NewReader("0123456789X"), 10)
	if !errors.Is(err, plugin.ErrTooLarge) {
		t.Fatalf("err = %v, want ErrTooLarge", err)
	}
	if !model.IsKind(err, model.ETOOLARGE) || !strings.Contains(err.Error(), "10 bytes") {
		t.Errorf("err %v: kind %s, want ETOOLARGE mentioning the limit", err, model.ErrorKind(err))
	}
	if files := listFiles(t, s.Dir); len(files) != 0 {
		t.Errorf("refused upload left %v behind", files)
	}
	if _, err := os.Stat(filepath.Join(s.Dir, "big")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("refused upload left its folder: %v", err)
	}

	got, err := s.Save("big", 1, strings.NewReader("0123456789"), 10)
	if err != nil || got.Size != 10 {
		t.Fatalf("exactly the limit: %+v, %v", got, err)
	}
}

type failingReader struct{ n int }

func (r *failingReader) Read(p []byte) (int, error) {
	if r.n > 0 {
		n := min(r.n, len(p))
		r.n -= n
		return n, nil
	}
	return 0, errors.New("connection reset")
}

func TestFileStoreRefusals(t *testing.T) {
	s := newFileStore(t)
	for _, name := range []string{"../x", "a/b", ".", "A", "", strings.Repeat("a", 65)} {
		_, err := s.Save(name, 1, strings.NewReader("x"), 0)
		if !model.IsKind(err, model.EINVALID) {
			t.Errorf("Save(%q) = %v, want EINVALID", name, err)
		}
	}
	if _, err := s.Save("ok", 0, strings.NewReader("x"), 0); !model.IsKind(err, model.EINVALID) {
		t.Errorf("version 0: %v, want EINVALID", err)
	}
	if _, err := s.Save("ok", 1, &failingReader{n: 100}, 0); err == nil || !strings.Contains(err.Error(), "connection reset") {
		t.Errorf("failing reader: %v", err)
	}
	if files := listFiles(t, s.Dir); len(files) != 0 {
		t.Errorf("refused uploads left %v behind", files)
	}
	entries, _ := os.ReadDir(filepath.Dir(s.Dir))
	if len(entries) != 1 {
		t.Errorf("something was written next to the store: %v", entries)
	}

	if _, err := s.Path("ok", 1, "../../etc/passwd"); !model.IsKind(err, model.EINVALID) {
		t.Errorf("Path with a bad sha: %v, want EINVALID", err)
	}
	if _, err := s.Open("ok", 1, strings.Repeat("a", 64)); !model.IsKind(err, model.ENOTFOUND) {
		t.Errorf("Open of a missing file: %v, want ENOTFOUND", err)
	}
}
