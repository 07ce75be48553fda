-- Halley schema, migration 6: an Idempotency-Key's work is recorded in the transaction that does it.
-- idempotency_commits: one row per (tenant, user, key) whose request changed an instance, written by the engine in
-- the same transaction as the change. Its primary key is the fence: a second request with the same key (one that
-- took over a claim whose first request seemed dead) cannot commit the work again. It also lets a retry whose
-- first request died before storing its response learn that the work was done, and on which instance.

CREATE TABLE idempotency_commits (
  tenant_id VARCHAR(64) NOT NULL,
  username VARCHAR(200) NOT NULL,
  idem_key VARCHAR(255) NOT NULL,
  instance_id VARCHAR(64) NOT NULL,
  created_at DATETIME(6) NOT NULL,
  PRIMARY KEY (tenant_id, username, idem_key)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE INDEX idx_idempotency_commits_created ON idempotency_commits (created_at);
