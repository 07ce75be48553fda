-- Halley schema, migration 4: uploaded plugins (runs are in plugin_runs, migration 2).
-- A file lives at <plugin dir>/<name>/<version>/<sha256>; the row says where and how to run it.

CREATE TABLE plugins (
  tenant_id VARCHAR(64) NOT NULL,
  name VARCHAR(64) NOT NULL,
  version INT NOT NULL,
  runtime VARCHAR(16) NOT NULL,
  timeout_ms BIGINT NOT NULL,
  sha256 CHAR(64) NOT NULL,
  size BIGINT NOT NULL,
  uploaded_by VARCHAR(200) NOT NULL,
  created_at DATETIME(6) NOT NULL,
  PRIMARY KEY (tenant_id, name, version)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
