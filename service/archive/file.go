// Package archive is Halley's retention: a background worker that writes finished instances older than their
// retention to gzipped JSON-lines files (one per day) and then deletes them from the database, and the code
// that reads those files back (`halley archive show`).
//
// An archive file is YYYY-MM-DD.jsonl.gz (the UTC day the sweep wrote it) in the archive directory. It is a
// series of gzip members, one per batch, each holding one JSON object per line: a model.ArchiveRecord, its "id"
// first. Any gzip reader reads the members of a file as one stream; `zcat 2026-11-25.jsonl.gz | jq .id` works.
package archive

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"time"

	"github.com/halley-bpm/halley/model"
)

// FileName is the archive file the sweep writes on day (UTC).
func FileName(day time.Time) string { return day.UTC().Format("2006-01-02") + ".jsonl.gz" }

// fileNamePattern keeps names read from the database to one file of the archive directory.
var fileNamePattern = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}\.jsonl\.gz$`)

// path returns the archive file name of dir, refusing anything that is not an archive file name.
func path(dir, name string) (string, error) {
	if !fileNamePattern.MatchString(name) {
		return "", fmt.Errorf("archive: %q is not an archive file name", name)
	}
	return filepath.Join(dir, name), nil
}

// encode returns the records as JSON lines (HTML characters unescaped; JSON values are compact, so a record is
// exactly one line).
func encode(recs []*model.ArchiveRecord) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	for _, r := range recs {
		if err := enc.Encode(r); err != nil {
			return nil, fmt.Errorf("archive: unable to encode instance %s: %w", r.ID, err)
		}
	}
	return b.Bytes(), nil
}

// appendMember makes the file dir/name end at offset — cutting off what a crashed sweep wrote past it — then
// appends lines as one gzip member, syncs the file and returns its new size. A file shorter than offset means
// the archive lost data the database has already deleted: that is an error for an operator, never papered over.
func appendMember(dir, name string, offset int64, lines []byte) (int64, error) {
	p, err := path(dir, name)
	if err != nil {
		return 0, err
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return 0, fmt.Errorf("archive: unable to create the archive directory: %w", err)
	}
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o640) //nolint:gosec // G302: operators' group reads the archive
	if err != nil {
		return 0, fmt.Errorf("archive: unable to open %s: %w", p, err)
	}
	defer f.Close() //nolint:errcheck // on success the file was synced below; on failure the first error is the one to return
	st, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("archive: unable to stat %s: %w", p, err)
	}
	switch {
	case st.Size() < offset:
		return 0, fmt.Errorf("archive: %s holds %d bytes but the database recorded %d before this batch: the file was truncated or replaced; restore it from a backup (then the sweep goes on)", p, st.Size(), offset)
	case st.Size() > offset:
		if err := f.Truncate(offset); err != nil {
			return 0, fmt.Errorf("archive: unable to cut %s back to %d bytes: %w", p, offset, err)
		}
	}
	if len(lines) > 0 {
		var gz bytes.Buffer
		w := gzip.NewWriter(&gz)
		if _, err := w.Write(lines); err != nil {
			return 0, err
		}
		if err := w.Close(); err != nil {
			return 0, err
		}
		// One write of the whole member at its offset: a reader never sees half a line of a finished batch.
		if _, err := f.WriteAt(gz.Bytes(), offset); err != nil {
			return 0, fmt.Errorf("archive: unable to write %s: %w", p, err)
		}
		offset += int64(gz.Len())
	}
	if err := f.Sync(); err != nil {
		return 0, fmt.Errorf("archive: unable to sync %s: %w", p, err)
	}
	if st.Size() == 0 {
		syncDir(dir) // a new file: make its directory entry durable too
	}
	return offset, nil
}

func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
}

// size returns the size of dir/name, 0 when it does not exist.
func size(dir, name string) (int64, error) {
	p, err := path(dir, name)
	if err != nil {
		return 0, err
	}
	st, err := os.Stat(p)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("archive: unable to stat %s: %w", p, err)
	}
	return st.Size(), nil
}

// ReadFile calls fn with every line of the archive file at p, in order. It stops at fn's first error and
// returns it. A torn last member (a crash while writing, before the sweep redid its batch) ends the file
// with an error after the complete lines before it.
func ReadFile(p string, fn func(line []byte) error) error {
	f, err := os.Open(p)
	if err != nil {
		return fmt.Errorf("archive: %w", err)
	}
	defer f.Close() //nolint:errcheck // opened read-only: Close has nothing to flush
	zr, err := gzip.NewReader(bufio.NewReader(f))
	if err != nil {
		return fmt.Errorf("archive: %s: %w", p, err)
	}
	defer zr.Close() //nolint:errcheck // a gzip reader's Close only reports the read errors the loop below already returns
	br := bufio.NewReaderSize(zr, 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 && line[len(line)-1] == '\n' {
			if ferr := fn(line[:len(line)-1]); ferr != nil {
				return ferr
			}
		} else if len(line) > 0 && err == nil {
			return fmt.Errorf("archive: %s: a line without its end", p)
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("archive: %s: %w", p, err)
		}
	}
}

// errFound stops ReadFile once the line is found.
var errFound = errors.New("found")

// Find returns the line of instance id in the archive file name of dir (the file its tombstone names).
// ENOTFOUND when the file has no such line.
func Find(dir, name, id string) (json.RawMessage, error) {
	p, err := path(dir, name)
	if err != nil {
		return nil, err
	}
	prefix := []byte(`{"id":` + quote(id) + `,`)
	var found json.RawMessage
	err = ReadFile(p, func(line []byte) error {
		if bytes.HasPrefix(line, prefix) {
			found = append(json.RawMessage(nil), line...)
			return errFound
		}
		return nil
	})
	if errors.Is(err, errFound) {
		return found, nil
	}
	if err != nil {
		return nil, err
	}
	return nil, model.CodedError(model.ENOTFOUND, "not_in_archive", "instance %s is not in %s", id, p)
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
