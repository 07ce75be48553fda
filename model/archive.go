package model

import (
	"context"
	"time"
)

// ArchivedInstance is the tombstone the retention sweep leaves for an instance it wrote to the archive and
// deleted: GET of the instance answers 410 archived, and File names the archive file (relative to the archive
// directory) that holds its line.
type ArchivedInstance struct {
	ID         string         `json:"id"`
	TenantID   string         `json:"-"`
	Template   string         `json:"template"`
	Version    int            `json:"version"`
	Status     InstanceStatus `json:"status"`
	EndedAt    time.Time      `json:"ended_at"`
	ArchivedAt time.Time      `json:"archived_at"`
	File       string         `json:"file"`
	BatchID    string         `json:"batch_id"`
}

// ArchiveRecord is one archived instance, one line of the archive: the instance's row and the rows of every table
// that refers to it (tasks, history, bookmarks, timers, cc, plugin runs and their logs, webhook deliveries,
// trigger log entries, idempotency commits, and the hidden template of a linear instance), by table name, each
// row as column → value. JSON columns hold JSON, times are UTC.
type ArchiveRecord struct {
	ID         string                      `json:"id"`
	TenantID   string                      `json:"tenant_id"`
	Template   string                      `json:"template"`
	Version    int                         `json:"version"`
	Status     InstanceStatus              `json:"status"`
	EndedAt    time.Time                   `json:"ended_at"`
	ArchivedAt time.Time                   `json:"archived_at"`
	BatchID    string                      `json:"batch_id"`
	Rows       map[string][]map[string]any `json:"rows"`
	// Rev is the instance's revision when it was read: the delete checks that nothing changed it since.
	Rev int64 `json:"-"`
}

// ArchiveBatch is the retention sweep's write-ahead marker for one batch: stored before the batch's lines are
// appended to File at Offset, deleted in the transaction that deletes the batch's instances. A batch still
// stored after a crash is redone: the file is cut back to Offset and the lines written again from the database.
type ArchiveBatch struct {
	ID          string
	File        string // relative to the archive directory: YYYY-MM-DD.jsonl.gz
	Offset      int64
	InstanceIDs []string
	CreatedAt   time.Time
}

// RetentionGroup is the instances of one template version, which share a retention.
type RetentionGroup struct {
	TenantID string
	Template string
	Version  int
}

// DueInstance is an instance the retention sweep may archive, and its cursor in the sweep.
type DueInstance struct {
	ID      string
	EndedAt time.Time
}

// Lease is a held leader lease: Token grows with every change of holder and fences writes of a former holder.
type Lease struct {
	Name  string
	Owner string
	Token int64
}

// ArchiveStore is what the retention sweep needs of the database.
type ArchiveStore interface {
	// AcquireLease takes or renews the named lease for owner until the given time, when it is free, expired or
	// already owner's. ok is false while another owner holds it.
	AcquireLease(ctx context.Context, name, owner string, now, until time.Time) (l Lease, ok bool, err error)
	// ReleaseLease gives the lease up if l still holds it.
	ReleaseLease(ctx context.Context, l Lease) error
	// RetentionGroups lists the template versions that have instances.
	RetentionGroups(ctx context.Context) ([]RetentionGroup, error)
	// VersionRetention returns the retention a template version's definition sets (options.retention), nil when
	// it sets none. ENOTFOUND for an unknown version.
	VersionRetention(ctx context.Context, tenant, key string, version int) (*time.Duration, error)
	// DueInstances returns up to limit of the group's instances that ended before endedBefore and after the
	// cursor after (by ended_at, then id; the zero value starts at the oldest), oldest first.
	DueInstances(ctx context.Context, g RetentionGroup, endedBefore time.Time, after DueInstance, limit int) ([]DueInstance, error)
	// PendingArchiveBatch returns the batch a crashed sweep left, nil when there is none.
	PendingArchiveBatch(ctx context.Context) (*ArchiveBatch, error)
	// BeginArchiveBatch stores the write-ahead marker of b (or replaces its instance ids), if l still holds
	// the lease (ECONFLICT lease_lost otherwise).
	BeginArchiveBatch(ctx context.Context, l Lease, b *ArchiveBatch, now time.Time) error
	// LoadArchiveRecords reads the instances with these ids and everything that refers to them. Instances that
	// are gone, running, or have plugin runs still going are left out.
	LoadArchiveRecords(ctx context.Context, ids []string) ([]*ArchiveRecord, error)
	// FinishArchiveBatch, in one transaction: checks that l holds the lease and that no record's instance
	// changed since it was loaded, writes a tombstone per record, deletes the records' rows and the marker. When
	// some instances changed it returns their ids and changes nothing.
	FinishArchiveBatch(ctx context.Context, l Lease, b *ArchiveBatch, recs []*ArchiveRecord, now time.Time) (changed []string, err error)
	// GetArchived returns the tombstone of an archived instance; ENOTFOUND when the id was not archived.
	GetArchived(ctx context.Context, tenant, id string) (*ArchivedInstance, error)
}
