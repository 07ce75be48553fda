package plugin

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"

	"github.com/halley-bpm/halley/model"
)

// ErrTooLarge is returned (wrapped) by FileStore.Save when the upload passes its size limit. It is a model error
// of kind ETOOLARGE, so the HTTP layer answers 413 without knowing about this package.
var ErrTooLarge = model.CodedError(model.ETOOLARGE, "plugin_too_large", "plugin file is too large")

// tooLargeError carries the limit in its message and still matches errors.Is(err, ErrTooLarge).
type tooLargeError struct{ err *model.Error }

func (e *tooLargeError) Error() string        { return e.err.Error() }
func (e *tooLargeError) Unwrap() error        { return e.err }
func (e *tooLargeError) Is(target error) bool { return target == ErrTooLarge }

// namePattern: lowercase letters, digits and dashes, starting with a letter, 1-64 characters. It can never
// contain a slash or a dot, so a name is always exactly one path element.
var namePattern = regexp.MustCompile(`^[a-z][a-z0-9-]{0,63}$`)

// shaPattern is a lowercase hex SHA-256, the file name of a stored version.
var shaPattern = regexp.MustCompile(`^[0-9a-f]{64}$`)

// ReservedName is not a plugin name: GET /api/v1/plugins/sandbox is the sandbox report.
const ReservedName = "sandbox"

// ValidName reports whether name can name a plugin. It returns an EINVALID error saying why not.
func ValidName(name string) error {
	if name == ReservedName {
		return model.CodedError(model.EINVALID, "bad_plugin_name", "plugin name %q is reserved (GET /api/v1/plugins/sandbox is the sandbox report)", name)
	}
	if !namePattern.MatchString(name) {
		return model.CodedError(model.EINVALID, "bad_plugin_name",
			"plugin name %q must be 1-64 lowercase letters, digits or dashes and start with a letter", name)
	}
	return nil
}

// StoredFile describes one saved plugin file.
type StoredFile struct {
	Path   string `json:"path"`   // absolute path on disk: <dir>/<name>/<version>/<sha256>
	SHA256 string `json:"sha256"` // lowercase hex
	Size   int64  `json:"size"`   // bytes
}

// FileStore keeps plugin files under Dir as <Dir>/<name>/<version>/<sha256>. Every path element comes from a
// validated name, an integer and a hash computed here, never from the client, so no upload can escape Dir.
type FileStore struct {
	Dir string
}

// NewFileStore returns a FileStore rooted at dir, creating dir if needed.
func NewFileStore(dir string) (*FileStore, error) {
	if dir == "" {
		return nil, errors.New("plugin: file store needs a directory")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("plugin: file store directory %q: %w", dir, err)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, fmt.Errorf("plugin: unable to create file store directory: %w", err)
	}
	return &FileStore{Dir: abs}, nil
}

// Save streams r to <Dir>/<name>/<version>/<sha256>, hashing while it copies. It writes a temporary file in the
// same directory, fsyncs it and renames it into place, so a reader never sees half a plugin. The file is mode
// 0755 so binaries can run. More than maxBytes bytes (when maxBytes > 0) fail with an error wrapping ErrTooLarge,
// and nothing is left behind. A bad name or version is EINVALID.
func (s *FileStore) Save(name string, version int, r io.Reader, maxBytes int64) (StoredFile, error) {
	if err := ValidName(name); err != nil {
		return StoredFile{}, err
	}
	if version < 1 {
		return StoredFile{}, model.Errorf(model.EINVALID, "plugin version must be at least 1, got %d", version)
	}
	nameDir := filepath.Join(s.Dir, name)
	dir := filepath.Join(nameDir, strconv.Itoa(version))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return StoredFile{}, fmt.Errorf("plugin: unable to create %s: %w", dir, err)
	}
	sf, err := s.save(dir, r, maxBytes)
	if err != nil {
		// Leave no empty folders behind a refused upload; Remove fails harmlessly when they hold other files.
		_ = os.Remove(dir)
		_ = os.Remove(nameDir)
		return StoredFile{}, err
	}
	return sf, nil
}

func (s *FileStore) save(dir string, r io.Reader, maxBytes int64) (_ StoredFile, err error) {
	tmp, err := os.CreateTemp(dir, ".upload-*")
	if err != nil {
		return StoredFile{}, fmt.Errorf("plugin: unable to create temporary file: %w", err)
	}
	defer func() {
		if err != nil {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()

	h := sha256.New()
	src := r
	if maxBytes > 0 {
		// One byte past the limit is enough to know it is too large without reading the rest.
		src = io.LimitReader(r, maxBytes+1)
	}
	n, err := io.Copy(io.MultiWriter(tmp, h), src)
	if err != nil {
		return StoredFile{}, fmt.Errorf("plugin: unable to write plugin file: %w", err)
	}
	if maxBytes > 0 && n > maxBytes {
		return StoredFile{}, &tooLargeError{model.CodedError(model.ETOOLARGE, "plugin_too_large",
			"plugin file is larger than the limit of %d bytes", maxBytes)}
	}
	if err := tmp.Chmod(0o755); err != nil {
		return StoredFile{}, fmt.Errorf("plugin: unable to chmod plugin file: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		return StoredFile{}, fmt.Errorf("plugin: unable to sync plugin file: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return StoredFile{}, fmt.Errorf("plugin: unable to close plugin file: %w", err)
	}
	sum := hex.EncodeToString(h.Sum(nil))
	final := filepath.Join(dir, sum)
	if err := os.Rename(tmp.Name(), final); err != nil {
		return StoredFile{}, fmt.Errorf("plugin: unable to move plugin file into place: %w", err)
	}
	syncDir(dir)
	return StoredFile{Path: final, SHA256: sum, Size: n}, nil
}

// syncDir makes a rename durable. Some network file systems refuse to fsync a directory; the data itself is
// already synced, so that is not worth failing an upload for.
func syncDir(dir string) {
	d, err := os.Open(dir)
	if err != nil {
		return
	}
	_ = d.Sync()
	_ = d.Close()
}

// Path returns where the file of plugin name, version and sha256 lives. It checks the arguments (EINVALID) but
// not that the file exists; use Open for that.
func (s *FileStore) Path(name string, version int, sha string) (string, error) {
	if err := ValidName(name); err != nil {
		return "", err
	}
	if version < 1 {
		return "", model.Errorf(model.EINVALID, "plugin version must be at least 1, got %d", version)
	}
	if !shaPattern.MatchString(sha) {
		return "", model.Errorf(model.EINVALID, "plugin sha256 %q is not 64 lowercase hex digits", sha)
	}
	return filepath.Join(s.Dir, name, strconv.Itoa(version), sha), nil
}

// Open opens a stored plugin file for reading. A missing file is ENOTFOUND.
func (s *FileStore) Open(name string, version int, sha string) (*os.File, error) {
	p, err := s.Path(name, version, sha)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, model.CodedError(model.ENOTFOUND, "plugin_file_not_found",
			"plugin %s version %d (%s) has no file", name, version, sha)
	}
	if err != nil {
		return nil, fmt.Errorf("plugin: unable to open plugin file: %w", err)
	}
	return f, nil
}
