// Package attachments keeps the files people upload (API.md "Attachments"): photos and documents put into start
// forms, node forms and approve/reject comments. Bytes are content-addressed by SHA-256, either in the database's
// blob tables (storage "database", the default: every replica reads them, as plugin files) or in a directory that
// every replica mounts (storage "dir"). An attachment is readable by its uploader, by admins, and by whoever may
// see an instance it is used in; uploads no instance uses are purged after a day.
package attachments

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/clock"
)

// DefaultMaxSize is the default upload limit (HALLEY_ATTACHMENT_MAX_SIZE): a phone's photo fits.
const DefaultMaxSize = 20 << 20

// UnusedFor is how long an upload no instance uses is kept.
const UnusedFor = 24 * time.Hour

// Config says where attachments live and how large they may be.
type Config struct {
	// Storage is model.AttachmentsInDatabase (default) or model.AttachmentsInDir.
	Storage string
	// Dir holds the files of storage "dir" (<Dir>/<sha256[:2]>/<sha256>) and, for both storages, the
	// temporary files of uploads in progress.
	Dir     string
	MaxSize int64 // default DefaultMaxSize
	Clock   clock.Clock
}

// Service uploads, serves and purges attachments.
type Service struct {
	store   model.AttachmentStore
	storage string
	dir     string
	max     int64
	clock   clock.Clock
}

// New checks cfg and prepares the directory.
func New(st model.AttachmentStore, cfg Config) (*Service, error) {
	if cfg.Storage == "" {
		cfg.Storage = model.AttachmentsInDatabase
	}
	if cfg.Storage != model.AttachmentsInDatabase && cfg.Storage != model.AttachmentsInDir {
		return nil, fmt.Errorf("attachments: storage must be %q or %q, not %q", model.AttachmentsInDatabase, model.AttachmentsInDir, cfg.Storage)
	}
	if cfg.Dir == "" {
		return nil, errors.New("attachments: a directory is required")
	}
	if cfg.MaxSize <= 0 {
		cfg.MaxSize = DefaultMaxSize
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if err := os.MkdirAll(filepath.Join(cfg.Dir, "tmp"), 0o750); err != nil {
		return nil, fmt.Errorf("attachments: unable to create %s: %w", cfg.Dir, err)
	}
	return &Service{store: st, storage: cfg.Storage, dir: cfg.Dir, max: cfg.MaxSize, clock: cfg.Clock}, nil
}

// MaxSize is the largest upload accepted, in bytes.
func (s *Service) MaxSize() int64 { return s.max }

// Storage says where the bytes are kept.
func (s *Service) Storage() string { return s.storage }

// Uploader is who uploads: a user of a tenant, or an anonymous submitter of FormKey's start form (Username "").
type Uploader struct {
	TenantID string
	Username string
	FormKey  string
}

// idRe is the shape of the ids New hands out; Refs finds references by it.
var idRe = regexp.MustCompile(`^att_[0-9a-f]{32}$`)

func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24)
	return "att_" + hex.EncodeToString(b[:])
}

// Upload stores content (read to its end, at most MaxSize bytes) as a new attachment named name. ETOOLARGE
// attachment_too_large beyond the limit, EINVALID empty_file for no bytes.
func (s *Service) Upload(ctx context.Context, u Uploader, name string, content io.Reader) (*model.Attachment, error) {
	tmp, err := os.CreateTemp(filepath.Join(s.dir, "tmp"), "upload-*")
	if err != nil {
		return nil, fmt.Errorf("attachments: unable to create a temporary file: %w", err)
	}
	defer func() {
		_ = tmp.Close()           // may be closed already
		_ = os.Remove(tmp.Name()) // renamed into place, or not needed any more
	}()
	h := sha256.New()
	head := &headWriter{max: 512}
	n, err := io.Copy(io.MultiWriter(tmp, h, head), io.LimitReader(content, s.max+1))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, s.tooLarge()
		}
		return nil, model.CodedError(model.EINVALID, "upload_failed", "the upload was cut off: %v", err)
	}
	if n > s.max {
		return nil, s.tooLarge()
	}
	if n == 0 {
		return nil, model.CodedError(model.EINVALID, "empty_file", "the file is empty")
	}
	a := &model.Attachment{ID: newID(), TenantID: u.TenantID, SHA256: hex.EncodeToString(h.Sum(nil)), Name: CleanName(name), Size: n,
		ContentType: DetectType(name, head.b), UploadedBy: u.Username, FormKey: u.FormKey, Storage: s.storage}
	if s.storage == model.AttachmentsInDir {
		if err := s.keepFile(tmp, a.SHA256); err != nil {
			return nil, err
		}
		return a, s.store.CreateAttachment(ctx, a, nil)
	}
	return a, s.store.CreateAttachment(ctx, a, tmp)
}

func (s *Service) tooLarge() error {
	return model.CodedError(model.ETOOLARGE, "attachment_too_large", "the file is larger than %d bytes (%s)", s.max, HumanSize(s.max)).
		WithDetails(map[string]any{"max_size": s.max})
}

// keepFile moves the upload to its content-addressed place, unless the same bytes are there already.
func (s *Service) keepFile(tmp *os.File, sum string) error {
	dst := s.filePath(sum)
	if _, err := os.Stat(dst); err == nil {
		return nil
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("attachments: unable to write the upload: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o750); err != nil {
		return fmt.Errorf("attachments: unable to create %s: %w", filepath.Dir(dst), err)
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return fmt.Errorf("attachments: unable to store the upload: %w", err)
	}
	return nil
}

func (s *Service) filePath(sum string) string { return filepath.Join(s.dir, sum[:2], sum) }

// Get returns an attachment of the tenant; ENOTFOUND attachment_not_found.
func (s *Service) Get(ctx context.Context, tenant, id string) (*model.Attachment, error) {
	if !idRe.MatchString(id) {
		return nil, notFound(id)
	}
	got, err := s.store.GetAttachments(ctx, tenant, []string{id})
	if err != nil {
		return nil, err
	}
	a := got[id]
	if a == nil {
		return nil, notFound(id)
	}
	return a, nil
}

func notFound(id string) error {
	return model.CodedError(model.ENOTFOUND, "attachment_not_found", "no attachment %q", id)
}

// Write writes a's bytes to w.
func (s *Service) Write(ctx context.Context, a *model.Attachment, w io.Writer) error {
	if a.Storage == model.AttachmentsInDir {
		f, err := os.Open(s.filePath(a.SHA256))
		if err != nil {
			return fmt.Errorf("attachments: the file of %s is missing from %s: %w", a.ID, s.dir, err)
		}
		defer f.Close() //nolint:errcheck // read-only
		_, err = io.Copy(w, f)
		return err
	}
	_, err := s.store.ReadBlob(ctx, a.SHA256, w)
	return err
}

// MayRead reports whether who may read a: admins, the uploader, and whoever sees (canSee) an instance a is used in.
func (s *Service) MayRead(ctx context.Context, who *model.Principal, a *model.Attachment, canSee func(instanceID string) bool) (bool, error) {
	if who.IsAdmin() || (a.UploadedBy != "" && a.UploadedBy == who.Username) {
		return true, nil
	}
	links, err := s.store.AttachmentLinks(ctx, a.TenantID, a.ID)
	if err != nil {
		return false, err
	}
	for _, id := range links {
		if canSee(id) {
			return true, nil
		}
	}
	return false, nil
}

// Refs returns the attachment ids the JSON documents refer to (strings of an attachment id's shape anywhere
// in them), each once.
func Refs(docs ...[]byte) []string {
	var out []string
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case string:
			if idRe.MatchString(x) && !slices.Contains(out, x) {
				out = append(out, x)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		case map[string]any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	for _, d := range docs {
		var v any
		if len(d) > 0 && json.Unmarshal(d, &v) == nil {
			walk(v)
		}
	}
	slices.Sort(out)
	return out
}

// CheckUse verifies that u may put the attachments ids into the instance instanceID ("" for a new one): each is
// the tenant's and was uploaded by u (by an anonymous submitter of u.FormKey when u is one), or is already used
// in that instance. Nobody can thus make an attachment of someone else readable through their own request.
// EUNPROCESSABLE unknown_attachment naming the first id at fault.
func (s *Service) CheckUse(ctx context.Context, u Uploader, instanceID string, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	got, err := s.store.GetAttachments(ctx, u.TenantID, ids)
	if err != nil {
		return err
	}
	for _, id := range ids {
		a := got[id]
		if a != nil && (a.UploadedBy == u.Username && (u.Username != "" || a.FormKey == u.FormKey)) {
			continue
		}
		if a != nil && instanceID != "" {
			links, err := s.store.AttachmentLinks(ctx, u.TenantID, id)
			if err != nil {
				return err
			}
			if slices.Contains(links, instanceID) {
				continue
			}
		}
		return model.CodedError(model.EUNPROCESSABLE, "unknown_attachment", "attachment %q is not one you uploaded; upload the file again", id).
			WithDetails(map[string]any{"attachment": id})
	}
	return nil
}

// Describe names the attachments ids (of the tenant) for a history entry, in the order given; an unknown id keeps
// its id only.
func (s *Service) Describe(ctx context.Context, tenant string, ids []string) ([]model.FileRef, error) {
	got, err := s.store.GetAttachments(ctx, tenant, ids)
	if err != nil {
		return nil, err
	}
	out := make([]model.FileRef, len(ids))
	for i, id := range ids {
		out[i] = model.FileRef{ID: id}
		if a := got[id]; a != nil {
			out[i] = model.FileRef{ID: id, Name: a.Name, Size: a.Size, ContentType: a.ContentType}
		}
	}
	return out, nil
}

// Link records that the attachments are used in the instance: who may see it may read them, and they are kept.
func (s *Service) Link(ctx context.Context, tenant, instanceID string, ids []string) error {
	return s.store.LinkAttachments(ctx, tenant, instanceID, ids)
}

// Purge deletes the uploads older than UnusedFor that no instance uses, and their files when nothing else holds
// the same bytes. It returns how many attachments went.
func (s *Service) Purge(ctx context.Context) (int, error) {
	gone, err := s.store.PurgeAttachments(ctx, s.clock.Now().Add(-UnusedFor), 500)
	if err != nil {
		return 0, err
	}
	for _, a := range gone {
		if a.Storage != model.AttachmentsInDir {
			continue
		}
		used, err := s.store.AttachmentSHAInUse(ctx, a.SHA256)
		if err != nil {
			return len(gone), err
		}
		if !used {
			if err := os.Remove(s.filePath(a.SHA256)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return len(gone), fmt.Errorf("attachments: unable to delete the file of %s: %w", a.ID, err)
			}
		}
	}
	return len(gone), nil
}

// headWriter keeps the first max bytes written (for content sniffing).
type headWriter struct {
	b   []byte
	max int
}

func (h *headWriter) Write(p []byte) (int, error) {
	if room := h.max - len(h.b); room > 0 {
		h.b = append(h.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

// CleanName makes an uploaded file's name safe to show and to send back in Content-Disposition: its last path
// element, without control characters, at most 255 bytes; "file" when nothing is left.
func CleanName(name string) string {
	name = strings.ReplaceAll(name, "\\", "/")
	name = path.Base(name)
	name = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == utf8.RuneError || r == '"' {
			return -1
		}
		return r
	}, name)
	name = strings.TrimSpace(name)
	for len(name) > 255 {
		_, size := utf8.DecodeLastRuneInString(name)
		name = name[:len(name)-size]
	}
	if name == "" || name == "." || name == "/" {
		return "file"
	}
	return name
}

// DetectType names the media type of an upload from its first bytes, or from its name's extension when the bytes
// say nothing more precise than "binary" or "text".
func DetectType(name string, head []byte) string {
	sniffed := http.DetectContentType(head)
	mt, _, _ := mime.ParseMediaType(sniffed)
	if mt != "application/octet-stream" && mt != "text/plain" {
		return mt
	}
	if byExt := mime.TypeByExtension(strings.ToLower(filepath.Ext(name))); byExt != "" {
		if m, _, err := mime.ParseMediaType(byExt); err == nil && !Risky(m) {
			return m
		}
	}
	return mt
}

// inline are the types a browser shows in its own viewer without running anything of the file's.
var inline = map[string]bool{"image/png": true, "image/jpeg": true, "image/gif": true, "image/webp": true, "image/bmp": true,
	"application/pdf": true, "text/plain": true, "video/mp4": true, "video/webm": true, "audio/mpeg": true, "audio/ogg": true, "audio/wav": true}

// Inline reports whether a file of this type may be shown in the browser (Content-Disposition inline); every
// other type is served as a download.
func Inline(contentType string) bool { return inline[contentType] }

// Risky reports a type a browser would run or render as a page: such files are served as
// application/octet-stream downloads.
func Risky(contentType string) bool {
	ct := strings.ToLower(contentType)
	return strings.Contains(ct, "html") || strings.Contains(ct, "xml") || strings.Contains(ct, "javascript") ||
		strings.Contains(ct, "ecmascript") || strings.HasPrefix(ct, "image/svg") || ct == "text/css" || ct == "application/x-shockwave-flash"
}

// HumanSize writes n bytes for people: 20 MiB, 512 KiB.
func HumanSize(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
