-- Halley schema: attachments (API.md "Attachments").
-- attachments: one uploaded file. Its bytes are content-addressed by sha256: in the blob tables (storage
-- "database", every replica reads them) or in HALLEY_ATTACHMENT_DIR (storage "dir", a mount every replica shares).
-- uploaded_by is the uploader's username, empty for an anonymous submitter of form_key's start form.
-- attachment_links: the instances an attachment was used in (a start context, a form value, an approve or reject
-- comment). Who may see one of these instances may read the attachment; an attachment with no link is purged
-- 24 hours after its upload.

CREATE TABLE attachments (
  id VARCHAR(40) NOT NULL PRIMARY KEY,
  tenant_id VARCHAR(64) NOT NULL,
  sha256 CHAR(64) NOT NULL,
  name VARCHAR(255) NOT NULL,
  size BIGINT NOT NULL,
  content_type VARCHAR(127) NOT NULL,
  uploaded_by VARCHAR(200) NOT NULL,
  form_key VARCHAR(128) NOT NULL,
  storage VARCHAR(16) NOT NULL,
  created_at DATETIME(6) NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE INDEX idx_attachments_sha256 ON attachments (sha256);

CREATE INDEX idx_attachments_created ON attachments (created_at);

CREATE TABLE attachment_links (
  attachment_id VARCHAR(40) NOT NULL,
  instance_id VARCHAR(64) NOT NULL,
  tenant_id VARCHAR(64) NOT NULL,
  created_at DATETIME(6) NOT NULL,
  PRIMARY KEY (attachment_id, instance_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE INDEX idx_attachment_links_instance ON attachment_links (instance_id);
