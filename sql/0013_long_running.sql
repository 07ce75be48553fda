-- Halley schema: a deployment that runs for years on several replicas (API.md, "Long-running
-- deployments").
-- blobs / blob_chunks: plugin files in the database, content-addressed by SHA-256, cut into chunks of at most
-- 1 MiB (far below max_allowed_packet and InnoDB's per-row redo limit), so every replica can fetch a version's file.
-- plugin_run_logs: the record of every attempt of a plugin run, readable from any replica.
-- archived_instances: one tombstone per instance the retention sweep archived and deleted (GET answers 410); file
-- names the archive file (relative to HALLEY_ARCHIVE_DIR) that holds its line.
-- archive_batches: the sweep's write-ahead marker (at most one row). A batch row is written before the batch's
-- lines are appended to file at file_offset and deleted in the transaction that deletes the batch's instances; a
-- row found after a crash is redone from the database after cutting the file back to file_offset.
-- leases: named leader leases with a fencing token (the retention sweep runs on one replica at a time).

CREATE TABLE blobs (
  sha256 CHAR(64) NOT NULL PRIMARY KEY,
  size BIGINT NOT NULL,
  chunks INT NOT NULL,
  created_at DATETIME(6) NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE blob_chunks (
  sha256 CHAR(64) NOT NULL,
  seq INT NOT NULL,
  data LONGBLOB NOT NULL,
  PRIMARY KEY (sha256, seq)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE plugin_run_logs (
  run_id VARCHAR(80) NOT NULL,
  attempt INT NOT NULL,
  tenant_id VARCHAR(64) NOT NULL,
  plugin VARCHAR(64) NOT NULL,
  instance_id VARCHAR(64) NOT NULL,
  record LONGTEXT NOT NULL,
  created_at DATETIME(6) NOT NULL,
  PRIMARY KEY (run_id, attempt)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE INDEX idx_plugin_run_logs_created ON plugin_run_logs (created_at);
CREATE INDEX idx_plugin_run_logs_instance ON plugin_run_logs (instance_id);

CREATE TABLE archived_instances (
  id VARCHAR(64) NOT NULL PRIMARY KEY,
  tenant_id VARCHAR(64) NOT NULL,
  tkey VARCHAR(64) NOT NULL,
  version INT NOT NULL,
  status VARCHAR(16) NOT NULL,
  ended_at DATETIME(6) NOT NULL,
  archived_at DATETIME(6) NOT NULL,
  file VARCHAR(255) NOT NULL,
  batch_id VARCHAR(36) NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE archive_batches (
  id VARCHAR(36) NOT NULL PRIMARY KEY,
  file VARCHAR(255) NOT NULL,
  file_offset BIGINT NOT NULL,
  instance_ids LONGTEXT NOT NULL,
  created_at DATETIME(6) NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE leases (
  name VARCHAR(64) NOT NULL PRIMARY KEY,
  owner VARCHAR(128) NOT NULL,
  token BIGINT NOT NULL,
  expires_at DATETIME(6) NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- The sweep finds due instances per template version by an index range (ended_at is NULL while running).
CREATE INDEX idx_instances_retention ON instances (tenant_id, tkey, version, ended_at);

-- The purges are index range scans (a MySQL test EXPLAINs each), and so is deleting an instance's rows.
CREATE INDEX idx_bookmarks_closed ON bookmarks (closed_at);
CREATE INDEX idx_timers_created ON timers (created_at);
CREATE INDEX idx_messages_consumed ON messages (consumed_at);
CREATE INDEX idx_subscription_deliveries_instance ON subscription_deliveries (instance_id);
CREATE INDEX idx_trigger_log_instance ON trigger_log (instance_id);
CREATE INDEX idx_idempotency_commits_instance ON idempotency_commits (instance_id);
CREATE INDEX idx_running_correlations_instance ON running_correlations (instance_id);
