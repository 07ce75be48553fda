package model

import (
	"context"
	"io"
	"time"
)

// Attachment is an uploaded file (API.md "Attachments"): its bytes are content-addressed by SHA256; the id is
// what start contexts, form values and approve/reject comments refer to.
type Attachment struct {
	ID          string `json:"id"`
	TenantID    string `json:"-"`
	SHA256      string `json:"sha256"`
	Name        string `json:"name"`
	Size        int64  `json:"size"`
	ContentType string `json:"content_type"`
	// UploadedBy is the uploader's username; empty for an anonymous submitter of FormKey's start form.
	UploadedBy string `json:"uploaded_by,omitempty"`
	FormKey    string `json:"-"`
	// Storage says where the bytes are: AttachmentsInDatabase or AttachmentsInDir.
	Storage   string    `json:"-"`
	CreatedAt time.Time `json:"created_at"`
}

// FileRef is an attachment as a history entry names it: what the timeline shows without another request.
type FileRef struct {
	ID          string `json:"id"`
	Name        string `json:"name,omitempty"`
	Size        int64  `json:"size,omitempty"`
	ContentType string `json:"content_type,omitempty"`
}

// Where attachments keep their bytes (HALLEY_ATTACHMENT_STORAGE).
const (
	AttachmentsInDatabase = "database"
	AttachmentsInDir      = "dir"
)

// AttachmentStore keeps attachments and the instances they are used in.
type AttachmentStore interface {
	// CreateAttachment stores a's row and, when content is not nil, its bytes (a.Size bytes with SHA-256
	// a.SHA256) in the database's blob tables unless they are there already.
	CreateAttachment(ctx context.Context, a *Attachment, content io.ReadSeeker) error
	// GetAttachments returns the tenant's attachments with these ids, by id; unknown ids are left out.
	GetAttachments(ctx context.Context, tenant string, ids []string) (map[string]*Attachment, error)
	// LinkAttachments records that the attachments ids are used in the instance (once each).
	LinkAttachments(ctx context.Context, tenant, instanceID string, ids []string) error
	// AttachmentLinks returns the instances an attachment is used in.
	AttachmentLinks(ctx context.Context, tenant, id string) ([]string, error)
	// ReadBlob writes the database-stored bytes with this SHA-256 to w; ENOTFOUND when there are none.
	ReadBlob(ctx context.Context, sum string, w io.Writer) (int64, error)
	// PurgeAttachments deletes the attachments uploaded before cutoff that no instance uses, and the blobs
	// nothing refers to any more. It returns the purged attachments (their dir-stored bytes are the caller's).
	PurgeAttachments(ctx context.Context, cutoff time.Time, limit int) ([]*Attachment, error)
	// AttachmentSHAInUse reports whether any attachment still has these bytes.
	AttachmentSHAInUse(ctx context.Context, sum string) (bool, error)
}
