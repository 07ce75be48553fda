package plugin

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/halley-bpm/halley/model"
)

// Hash reads r to the end and returns its SHA-256 (lowercase hex) and size. More than maxBytes bytes (when
// maxBytes > 0) is an error wrapping ErrTooLarge (ETOOLARGE, 413).
func Hash(r io.Reader, maxBytes int64) (string, int64, error) {
	h := sha256.New()
	src := r
	if maxBytes > 0 {
		src = io.LimitReader(r, maxBytes+1)
	}
	n, err := io.Copy(h, src)
	if err != nil {
		return "", n, fmt.Errorf("plugin: unable to read the plugin file: %w", err)
	}
	if maxBytes > 0 && n > maxBytes {
		return "", n, &tooLargeError{model.CodedError(model.ETOOLARGE, "plugin_too_large",
			"plugin file is larger than the limit of %d bytes", maxBytes)}
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// BlobSource is where plugin files are stored for every replica: the database (the store's blob tables).
type BlobSource interface {
	// ReadBlob writes the stored file with this SHA-256 to w; ENOTFOUND when there is none.
	ReadBlob(ctx context.Context, sha256 string, w io.Writer) (int64, error)
}

// Cache is this replica's copy of plugin files, by SHA-256, under one local directory (<HALLEY_PLUGIN_DIR>/sha256).
// A file is fetched from the BlobSource on first use and its hash checked before it is used; a file already
// in the directory (from an earlier run of the process) is hashed again on its first use by this process, and
// again whenever its size or modification time changed since. A file whose hash does not match is replaced.
type Cache struct {
	dir string
	src BlobSource

	mu       sync.Mutex
	verified map[string]fileStamp   // sha256 → what the checked file looked like
	fetching map[string]*sync.Mutex // one fetch per sha256 at a time
}

type fileStamp struct {
	size    int64
	modTime time.Time
}

// NewCache returns a cache in dir (created when missing) that fetches from src.
func NewCache(dir string, src BlobSource) (*Cache, error) {
	if dir == "" {
		return nil, errors.New("plugin: the plugin cache needs a directory")
	}
	if src == nil {
		return nil, errors.New("plugin: the plugin cache needs a source of plugin files (the store)")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("plugin: cache directory %q: %w", dir, err)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, fmt.Errorf("plugin: unable to create the cache directory: %w", err)
	}
	return &Cache{dir: abs, src: src, verified: map[string]fileStamp{}, fetching: map[string]*sync.Mutex{}}, nil
}

// Dir is the cache directory.
func (c *Cache) Dir() string { return c.dir }

// Path returns the path of a checked local copy of the file with this SHA-256, fetching it first when needed.
// ENOTFOUND (plugin_file_not_found) when the file is stored nowhere.
func (c *Cache) Path(ctx context.Context, sum string) (string, error) {
	if !shaPattern.MatchString(sum) {
		return "", model.Errorf(model.EINVALID, "plugin sha256 %q is not 64 lowercase hex digits", sum)
	}
	p := filepath.Join(c.dir, sum)
	if c.fresh(sum, p) {
		return p, nil
	}
	lock := c.lockFor(sum)
	lock.Lock()
	defer lock.Unlock()
	if c.fresh(sum, p) { // fetched by another caller while this one waited
		return p, nil
	}
	if st, ok := c.check(p, sum); ok {
		c.remember(sum, st)
		return p, nil
	}
	st, err := c.fetch(ctx, sum, p)
	if err != nil {
		return "", err
	}
	c.remember(sum, st)
	return p, nil
}

func (c *Cache) lockFor(sum string) *sync.Mutex {
	c.mu.Lock()
	defer c.mu.Unlock()
	l := c.fetching[sum]
	if l == nil {
		l = &sync.Mutex{}
		c.fetching[sum] = l
	}
	return l
}

func (c *Cache) remember(sum string, st fileStamp) {
	c.mu.Lock()
	c.verified[sum] = st
	c.mu.Unlock()
}

// fresh reports whether the file was checked by this process and has not changed since (same size and time).
func (c *Cache) fresh(sum, p string) bool {
	c.mu.Lock()
	want, ok := c.verified[sum]
	c.mu.Unlock()
	if !ok {
		return false
	}
	fi, err := os.Stat(p)
	return err == nil && fi.Size() == want.size && fi.ModTime().Equal(want.modTime)
}

// check hashes the file at p; ok when it exists and its SHA-256 is sum. A file with another hash is removed.
func (c *Cache) check(p, sum string) (fileStamp, bool) {
	f, err := os.Open(p)
	if err != nil {
		return fileStamp{}, false
	}
	defer f.Close() //nolint:errcheck // opened read-only: Close has nothing to flush
	fi, err := f.Stat()
	if err != nil {
		return fileStamp{}, false
	}
	got, _, err := Hash(f, 0)
	if err != nil || got != sum {
		_ = os.Remove(p)
		return fileStamp{}, false
	}
	return fileStamp{fi.Size(), fi.ModTime()}, true
}

// fetch copies the stored file into the cache: a temporary file hashed while written, renamed into place only
// when its SHA-256 is the expected one.
func (c *Cache) fetch(ctx context.Context, sum, p string) (_ fileStamp, err error) {
	tmp, err := os.CreateTemp(c.dir, ".fetch-*")
	if err != nil {
		return fileStamp{}, fmt.Errorf("plugin: unable to create a file in the cache: %w", err)
	}
	defer func() {
		if err != nil {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	h := sha256.New()
	if _, err := c.src.ReadBlob(ctx, sum, io.MultiWriter(tmp, h)); err != nil {
		if model.IsKind(err, model.ENOTFOUND) {
			return fileStamp{}, model.CodedError(model.ENOTFOUND, "plugin_file_not_found",
				"the plugin file with SHA-256 %s is not stored in the database (a version uploaded before plugin files were kept there, whose replica never imported it): upload the plugin again", sum)
		}
		return fileStamp{}, fmt.Errorf("plugin: unable to fetch plugin file %s: %w", sum, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != sum {
		return fileStamp{}, fmt.Errorf("plugin: the stored file %s has SHA-256 %s: refusing to run it", sum, got)
	}
	if err := tmp.Chmod(0o755); err != nil { // binaries must be executable
		return fileStamp{}, fmt.Errorf("plugin: unable to chmod a cached file: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		return fileStamp{}, fmt.Errorf("plugin: unable to sync a cached file: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fileStamp{}, fmt.Errorf("plugin: unable to close a cached file: %w", err)
	}
	if err := os.Rename(tmp.Name(), p); err != nil {
		return fileStamp{}, fmt.Errorf("plugin: unable to move a fetched file into the cache: %w", err)
	}
	fi, err := os.Stat(p)
	if err != nil {
		return fileStamp{}, fmt.Errorf("plugin: %w", err)
	}
	return fileStamp{fi.Size(), fi.ModTime()}, nil
}

// LegacyStore is what ImportLegacy needs of the database.
type LegacyStore interface {
	// PluginsWithoutFile lists the plugin versions whose file is not stored in the database.
	PluginsWithoutFile(ctx context.Context) ([]*model.Plugin, error)
	// ImportBlob stores a file by its SHA-256 (a no-op when it is stored already).
	ImportBlob(ctx context.Context, sha256 string, size int64, content io.ReadSeeker) error
}

// ImportLegacy moves plugin files of releases that kept them on a replica's disk (<dir>/<name>/<version>/<sha256>,
// see FileStore) into the database, so that every replica can run them. Every replica does this at start with
// its own directory, so files that only one replica had are imported when it starts. It returns how many files
// it imported and the versions whose file is still stored nowhere (their runs fail until they are uploaded
// again, or until the replica that has the file starts).
func ImportLegacy(ctx context.Context, dir string, st LegacyStore) (imported int, missing []*model.Plugin, err error) {
	ps, err := st.PluginsWithoutFile(ctx)
	if err != nil {
		return 0, nil, err
	}
	files := FileStore{Dir: dir}
	for _, p := range ps {
		ok, err := importOne(ctx, files, st, p)
		if err != nil {
			return imported, nil, err
		}
		if ok {
			imported++
		} else {
			missing = append(missing, p)
		}
	}
	return imported, missing, nil
}

func importOne(ctx context.Context, files FileStore, st LegacyStore, p *model.Plugin) (bool, error) {
	f, err := files.Open(p.Name, p.Version, p.SHA256)
	if model.IsKind(err, model.ENOTFOUND) || model.IsKind(err, model.EINVALID) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer f.Close() //nolint:errcheck // opened read-only: Close has nothing to flush
	// A damaged copy (another hash) is not imported: the version stays without a file.
	if sum, _, err := Hash(f, 0); err != nil || sum != p.SHA256 {
		return false, nil
	}
	if err := st.ImportBlob(ctx, p.SHA256, p.Size, f); err != nil {
		return false, fmt.Errorf("plugin: unable to import %s version %d from %s: %w", p.Name, p.Version, f.Name(), err)
	}
	return true, nil
}
