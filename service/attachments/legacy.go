package attachments

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/halley-bpm/halley/model"
)

// Before uploads existed (issue 32), the `attachment` form component kept each file inline in the instance's
// context: {"name", "size", "type", "data_url": "data:<type>;base64,<bytes>"}. MigrateDataURLs moves such files
// into the attachments store and leaves in their place what an upload leaves, {"id", "name", "size",
// "content_type"}, linked to the instance: the context shrinks and the file is served like any other.

// LegacyContext is an instance's context as the data-URL migration reads it.
type LegacyContext struct {
	ID        string
	TenantID  string
	Initiator string
	Context   string
}

// LegacyContexts are the instances the data-URL migration reads and rewrites (service/store).
type LegacyContexts interface {
	// ContextsWithDataURLs returns, by id, up to limit instances after the id after whose context holds the text
	// "data_url".
	ContextsWithDataURLs(ctx context.Context, after string, limit int) ([]LegacyContext, error)
	// SwapContext replaces the context of the instance id by next if it still is old; false when it changed.
	SwapContext(ctx context.Context, id, old, next string) (bool, error)
}

// MigrationStats says what MigrateDataURLs did.
type MigrationStats struct {
	Instances int // instances whose context was rewritten
	Files     int // inline files moved into the attachments store
	Skipped   int // inline files left where they are (not a base64 data: URL, or larger than the upload limit)
	Changed   int // instances that changed while they were migrated (done at the next run)
}

// MigrationBatch is how many instances MigrateDataURLs reads at a time.
const MigrationBatch = 100

// MigrateDataURLs moves the inline data: URL files of every instance's context into the attachments store, batch
// instances at a time (MigrationBatch when 0). It is idempotent: a migrated context holds no data URL any more,
// and a context that changed meanwhile is left for the next run (the attachments made for it are purged as
// unused uploads after a day). Files that cannot be moved stay inline (the UI still offers them as downloads).
func (s *Service) MigrateDataURLs(ctx context.Context, src LegacyContexts, batch int, log *slog.Logger) (MigrationStats, error) {
	var st MigrationStats
	if batch <= 0 {
		batch = MigrationBatch
	}
	after := ""
	for {
		rows, err := src.ContextsWithDataURLs(ctx, after, batch)
		if err != nil {
			return st, err
		}
		for _, r := range rows {
			after = r.ID
			if err := s.migrateOne(ctx, src, r, &st); err != nil {
				return st, err
			}
		}
		if len(rows) < batch {
			break
		}
	}
	if log != nil && (st.Instances > 0 || st.Skipped > 0 || st.Changed > 0) {
		log.Info("attachments: inline data: URL files moved into the attachments store", "instances", st.Instances, "files", st.Files,
			"left_inline", st.Skipped, "changed_meanwhile", st.Changed)
	}
	return st, nil
}

func (s *Service) migrateOne(ctx context.Context, src LegacyContexts, r LegacyContext, st *MigrationStats) error {
	dec := json.NewDecoder(strings.NewReader(r.Context))
	dec.UseNumber() // numbers stay exactly as they were
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return nil // not JSON: nothing Halley wrote; left alone
	}
	var ids []string
	var walkErr error
	var walk func(v any) any
	walk = func(v any) any {
		switch x := v.(type) {
		case []any:
			for i, e := range x {
				x[i] = walk(e)
			}
		case map[string]any:
			if du, ok := x["data_url"].(string); ok {
				ref, err := s.moveInline(ctx, r, x, du)
				switch {
				case err != nil && walkErr == nil && !isSkip(err):
					walkErr = err
				case err != nil:
					st.Skipped++
				default:
					ids = append(ids, ref["id"].(string))
					return ref
				}
				return x
			}
			for k, e := range x {
				x[k] = walk(e)
			}
		}
		return v
	}
	doc = walk(doc)
	if walkErr != nil {
		return walkErr
	}
	if len(ids) == 0 {
		return nil
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(doc); err != nil {
		return fmt.Errorf("attachments: unable to encode the context of %s: %w", r.ID, err)
	}
	// Linked first: once the context names them, whoever sees the instance may read them.
	if err := s.Link(ctx, r.TenantID, r.ID, ids); err != nil {
		return err
	}
	ok, err := src.SwapContext(ctx, r.ID, r.Context, strings.TrimSuffix(buf.String(), "\n"))
	if err != nil {
		return err
	}
	if !ok {
		st.Changed++
		return nil
	}
	st.Instances++
	st.Files += len(ids)
	return nil
}

type skipError struct{ why string }

func (e skipError) Error() string { return e.why }

func isSkip(err error) bool {
	var s skipError
	return errors.As(err, &s)
}

// moveInline stores one inline file and returns what a file field keeps of an upload.
func (s *Service) moveInline(ctx context.Context, r LegacyContext, f map[string]any, dataURL string) (map[string]any, error) {
	head, payload, ok := strings.Cut(dataURL, ",")
	if !ok || !strings.HasPrefix(head, "data:") || !strings.HasSuffix(head, ";base64") {
		return nil, skipError{"not a base64 data: URL"}
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(payload))
	if err != nil {
		if raw, err = base64.RawStdEncoding.DecodeString(strings.TrimSpace(payload)); err != nil {
			return nil, skipError{"not base64"}
		}
	}
	if len(raw) == 0 {
		return nil, skipError{"empty"}
	}
	name, _ := f["name"].(string)
	a, err := s.Upload(ctx, Uploader{TenantID: r.TenantID, Username: r.Initiator}, name, bytes.NewReader(raw))
	if err != nil {
		var me *model.Error
		if errors.As(err, &me) && me.Code == "attachment_too_large" {
			return nil, skipError{"too large"}
		}
		return nil, err
	}
	return map[string]any{"id": a.ID, "name": a.Name, "size": a.Size, "content_type": a.ContentType}, nil
}
