-- Halley schema: credentials with a lifecycle, and the audit log (API.md, "People and credentials",
-- "Operations").
-- users.token_version: every login token carries the version it was signed at; a password change, an admin
-- reset, disabling the user or taking a role away bumps it, and tokens signed before stop working.
-- api_tokens.owner: the admin whose authority the token carries (it works only while that user is an enabled
-- admin); expires_at (NULL = never) and last_used_at (written at most once a minute per token).
-- audit_log: who changed what (append-only from the API), newest first by (at, id); purged by at.

ALTER TABLE users ADD COLUMN token_version BIGINT NOT NULL DEFAULT 0;

ALTER TABLE api_tokens ADD COLUMN owner VARCHAR(64) NOT NULL DEFAULT '';
ALTER TABLE api_tokens ADD COLUMN expires_at DATETIME(6) NULL;
ALTER TABLE api_tokens ADD COLUMN last_used_at DATETIME(6) NULL;
UPDATE api_tokens SET owner = created_by WHERE created_by NOT LIKE 'token:%';

CREATE INDEX idx_api_tokens_tenant ON api_tokens (tenant_id, name, id);
CREATE INDEX idx_api_tokens_owner ON api_tokens (tenant_id, owner);

CREATE TABLE audit_log (
  id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
  tenant_id VARCHAR(64) NOT NULL,
  at DATETIME(6) NOT NULL,
  actor VARCHAR(200) NOT NULL,
  actor_token VARCHAR(36) NOT NULL,
  action VARCHAR(64) NOT NULL,
  target VARCHAR(255) NOT NULL,
  before_state LONGTEXT NULL,
  after_state LONGTEXT NULL,
  reason VARCHAR(1000) NOT NULL,
  ip VARCHAR(64) NOT NULL,
  request_id VARCHAR(64) NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE INDEX idx_audit_log_tenant ON audit_log (tenant_id, at, id);
CREATE INDEX idx_audit_log_actor ON audit_log (tenant_id, actor, at, id);
CREATE INDEX idx_audit_log_action ON audit_log (tenant_id, action, at, id);
CREATE INDEX idx_audit_log_at ON audit_log (at);
