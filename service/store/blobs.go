package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"

	"gorm.io/gorm"

	"github.com/halley-bpm/halley/model"
)

// BlobChunkSize is the largest chunk of a stored file in one row: far below MySQL's max_allowed_packet (16 MiB
// on MariaDB, 64 MiB on MySQL 8) even escaped, and below InnoDB's redo-log limit for one row's BLOB (a tenth of
// the redo log), so any plugin size the upload limit allows can be stored.
const BlobChunkSize = 1 << 20

// errBlobRace: a concurrent transaction stored the same blob first; the caller's transaction is run again and
// then finds it.
var errBlobRace = errors.New("store: blob stored concurrently")

// putBlob stores content (size bytes, SHA-256 sum) as a blob within tx, unless a blob with that sum is stored
// already. It reads content to the end and checks size and sum as it goes: a mismatch stores nothing.
func (s *Store) putBlob(tx *gorm.DB, sum string, size int64, content io.Reader) error {
	var n int64
	if err := tx.Raw("SELECT COUNT(*) FROM blobs WHERE sha256 = ?", sum).Scan(&n).Error; err != nil {
		return fmt.Errorf("store: unable to look up blob %s: %w", sum, err)
	}
	if n > 0 {
		return nil // content-addressed: the same bytes are stored once
	}
	chunks := int((size + BlobChunkSize - 1) / BlobChunkSize)
	// The blob row first: it takes the primary-key lock, so a concurrent upload of the same bytes waits here and
	// then fails with a duplicate key instead of interleaving chunk rows.
	if err := tx.Exec("INSERT INTO blobs (sha256, size, chunks, created_at) VALUES (?, ?, ?, ?)", sum, size, chunks, s.now()).Error; err != nil {
		if isDuplicate(err) {
			return errBlobRace
		}
		return fmt.Errorf("store: unable to store blob %s: %w", sum, err)
	}
	h := sha256.New()
	buf := make([]byte, BlobChunkSize)
	var total int64
	for seq := 0; ; seq++ {
		n, rerr := io.ReadFull(content, buf)
		if n > 0 {
			h.Write(buf[:n])
			total += int64(n)
			if total > size {
				return fmt.Errorf("store: blob %s is longer than its %d bytes", sum, size)
			}
			if err := tx.Exec("INSERT INTO blob_chunks (sha256, seq, data) VALUES (?, ?, ?)", sum, seq, buf[:n]).Error; err != nil {
				return fmt.Errorf("store: unable to store chunk %d of blob %s: %w", seq, sum, err)
			}
		}
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			break
		}
		if rerr != nil {
			return fmt.Errorf("store: unable to read the file of blob %s: %w", sum, rerr)
		}
	}
	if total != size || hex.EncodeToString(h.Sum(nil)) != sum {
		return fmt.Errorf("store: the file changed while it was stored (%d bytes, expected %d with SHA-256 %s)", total, size, sum)
	}
	return nil
}

// storeWithBlob runs fn (which stores the blob and whatever refers to it) in a transaction, once more when a
// concurrent transaction stored the same blob first; content is rewound before every attempt (inTx also runs
// fn again after a deadlock).
func (s *Store) storeWithBlob(ctx context.Context, content io.ReadSeeker, fn func(tx *gorm.DB) error) error {
	var err error
	for attempt := 0; attempt < 2; attempt++ {
		err = s.inTx(ctx, func(tx *gorm.DB) error {
			if _, err := content.Seek(0, io.SeekStart); err != nil {
				return fmt.Errorf("store: unable to rewind the file: %w", err)
			}
			return fn(tx)
		})
		if !errors.Is(err, errBlobRace) {
			return err
		}
	}
	return err
}

// ReadBlob writes the stored file with this SHA-256 to w, one chunk at a time, and returns its size. ENOTFOUND
// when no such blob is stored. It checks the length and the chunk sequence; the caller verifies the hash.
func (s *Store) ReadBlob(ctx context.Context, sum string, w io.Writer) (int64, error) {
	var size int64
	var chunks int
	err := s.sqlDB.QueryRowContext(ctx, "SELECT size, chunks FROM blobs WHERE sha256 = ?", sum).Scan(&size, &chunks)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, model.CodedError(model.ENOTFOUND, "blob_not_found", "no file with SHA-256 %s is stored in the database", sum)
	}
	if err != nil {
		return 0, fmt.Errorf("store: unable to read blob %s: %w", sum, err)
	}
	var total int64
	// One chunk per query: a row is at most BlobChunkSize, so memory stays bounded whatever the file's size.
	for seq := 0; seq < chunks; seq++ {
		var data []byte
		if err := s.sqlDB.QueryRowContext(ctx, "SELECT data FROM blob_chunks WHERE sha256 = ? AND seq = ?", sum, seq).Scan(&data); err != nil {
			return total, fmt.Errorf("store: unable to read chunk %d of blob %s: %w", seq, sum, err)
		}
		n, err := w.Write(data)
		total += int64(n)
		if err != nil {
			return total, err
		}
	}
	if total != size {
		return total, fmt.Errorf("store: blob %s holds %d bytes, expected %d", sum, total, size)
	}
	return total, nil
}

// HasBlob reports whether a file with this SHA-256 is stored.
func (s *Store) HasBlob(ctx context.Context, sum string) (bool, error) {
	var one int
	err := s.sqlDB.QueryRowContext(ctx, "SELECT 1 FROM blobs WHERE sha256 = ?", sum).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("store: unable to look up blob %s: %w", sum, err)
	}
	return true, nil
}

// ImportBlob stores a file that is not in the database yet (plugin files of an earlier release, which lived on
// a replica's disk). A blob stored already, or concurrently by another replica, is left as it is.
func (s *Store) ImportBlob(ctx context.Context, sum string, size int64, content io.ReadSeeker) error {
	return s.storeWithBlob(ctx, content, func(tx *gorm.DB) error {
		return s.putBlob(tx, sum, size, content)
	})
}

// PluginsWithoutFile lists the plugin versions (of every tenant) whose file is not stored in the database.
func (s *Store) PluginsWithoutFile(ctx context.Context) ([]*model.Plugin, error) {
	var rows []pluginRow
	err := s.db.WithContext(ctx).Raw("SELECT p.* FROM plugins p LEFT JOIN blobs b ON b.sha256 = p.sha256 WHERE b.sha256 IS NULL ORDER BY p.tenant_id, p.name, p.version").
		Scan(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("store: unable to list plugin versions without a stored file: %w", err)
	}
	out := make([]*model.Plugin, len(rows))
	for i := range rows {
		out[i] = rows[i].toModel()
	}
	return out, nil
}
