-- Halley schema, migration 2: templates, instances and everything the engine writes.
-- An instance's node and edge states live in instances.state (one JSON document), so a step reads and writes
-- one instance row; tasks, bookmarks, timers, history and the outbox are rows because they are queried.

CREATE TABLE templates (
  tenant_id VARCHAR(64) NOT NULL,
  tkey VARCHAR(64) NOT NULL,
  name VARCHAR(200) NOT NULL,
  description TEXT NOT NULL,
  draft LONGTEXT NOT NULL,
  draft_updated_at DATETIME(6) NOT NULL,
  latest_version INT NULL,
  start_kind VARCHAR(32) NOT NULL,
  hidden TINYINT NOT NULL,
  created_by VARCHAR(200) NOT NULL,
  created_at DATETIME(6) NOT NULL,
  updated_at DATETIME(6) NOT NULL,
  PRIMARY KEY (tenant_id, tkey)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE template_versions (
  tenant_id VARCHAR(64) NOT NULL,
  tkey VARCHAR(64) NOT NULL,
  version INT NOT NULL,
  definition LONGTEXT NOT NULL,
  published_at DATETIME(6) NOT NULL,
  published_by VARCHAR(200) NOT NULL,
  PRIMARY KEY (tenant_id, tkey, version)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE instances (
  id VARCHAR(64) NOT NULL PRIMARY KEY,
  tenant_id VARCHAR(64) NOT NULL,
  tkey VARCHAR(64) NOT NULL,
  version INT NOT NULL,
  title VARCHAR(500) NOT NULL,
  status VARCHAR(16) NOT NULL,
  initiator VARCHAR(200) NOT NULL,
  correlation_id VARCHAR(255) NOT NULL,
  context LONGTEXT NOT NULL,
  state LONGTEXT NOT NULL,
  rev BIGINT NOT NULL,
  created_at DATETIME(6) NOT NULL,
  updated_at DATETIME(6) NOT NULL,
  ended_at DATETIME(6) NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE INDEX idx_instances_status ON instances (tenant_id, status, id);
CREATE INDEX idx_instances_template ON instances (tenant_id, tkey, id);
CREATE INDEX idx_instances_initiator ON instances (tenant_id, initiator, id);
CREATE INDEX idx_instances_correlation ON instances (tenant_id, correlation_id);

CREATE TABLE tasks (
  id VARCHAR(80) NOT NULL PRIMARY KEY,
  tenant_id VARCHAR(64) NOT NULL,
  instance_id VARCHAR(64) NOT NULL,
  node_id VARCHAR(128) NOT NULL,
  node_name VARCHAR(200) NOT NULL,
  node_instance_id VARCHAR(80) NOT NULL,
  assignee VARCHAR(200) NOT NULL,
  status VARCHAR(16) NOT NULL,
  kind VARCHAR(16) NOT NULL,
  grp INT NOT NULL,
  position INT NOT NULL,
  parent_id VARCHAR(80) NOT NULL,
  after_signers TEXT NOT NULL,
  comment TEXT NOT NULL,
  data LONGTEXT NOT NULL,
  decided_by VARCHAR(200) NOT NULL,
  title VARCHAR(500) NOT NULL,
  tkey VARCHAR(64) NOT NULL,
  initiator VARCHAR(200) NOT NULL,
  created_at DATETIME(6) NOT NULL,
  decided_at DATETIME(6) NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE INDEX idx_tasks_inbox ON tasks (tenant_id, assignee, status, created_at);
CREATE INDEX idx_tasks_instance ON tasks (instance_id, status);

CREATE TABLE history (
  seq BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
  tenant_id VARCHAR(64) NOT NULL,
  instance_id VARCHAR(64) NOT NULL,
  at DATETIME(6) NOT NULL,
  actor VARCHAR(200) NOT NULL,
  action VARCHAR(64) NOT NULL,
  node_id VARCHAR(128) NOT NULL,
  task_id VARCHAR(80) NOT NULL,
  comment TEXT NOT NULL,
  data LONGTEXT NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE INDEX idx_history_instance ON history (instance_id, seq);

CREATE TABLE bookmarks (
  id VARCHAR(80) NOT NULL PRIMARY KEY,
  tenant_id VARCHAR(64) NOT NULL,
  instance_id VARCHAR(64) NOT NULL,
  node_id VARCHAR(128) NOT NULL,
  node_instance_id VARCHAR(80) NOT NULL,
  kind VARCHAR(16) NOT NULL,
  hash CHAR(64) NOT NULL,
  message_name VARCHAR(255) NOT NULL,
  correlation_id VARCHAR(255) NOT NULL,
  payload LONGTEXT NOT NULL,
  created_at DATETIME(6) NOT NULL,
  closed_at DATETIME(6) NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE INDEX idx_bookmarks_instance ON bookmarks (instance_id, closed_at);
CREATE INDEX idx_bookmarks_hash ON bookmarks (tenant_id, hash, closed_at);
CREATE INDEX idx_bookmarks_node ON bookmarks (node_instance_id);

CREATE TABLE messages (
  id VARCHAR(64) NOT NULL PRIMARY KEY,
  tenant_id VARCHAR(64) NOT NULL,
  name VARCHAR(255) NOT NULL,
  correlation_id VARCHAR(255) NOT NULL,
  hash CHAR(64) NOT NULL,
  data LONGTEXT NOT NULL,
  created_at DATETIME(6) NOT NULL,
  expires_at DATETIME(6) NOT NULL,
  consumed_at DATETIME(6) NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE INDEX idx_messages_hash ON messages (tenant_id, hash, consumed_at, expires_at);
CREATE INDEX idx_messages_expires ON messages (expires_at);

CREATE TABLE timers (
  id VARCHAR(80) NOT NULL PRIMARY KEY,
  tenant_id VARCHAR(64) NOT NULL,
  instance_id VARCHAR(64) NOT NULL,
  node_id VARCHAR(128) NOT NULL,
  node_instance_id VARCHAR(80) NOT NULL,
  kind VARCHAR(32) NOT NULL,
  due_at DATETIME(6) NOT NULL,
  status VARCHAR(16) NOT NULL,
  payload LONGTEXT NOT NULL,
  created_at DATETIME(6) NOT NULL,
  fired_at DATETIME(6) NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE INDEX idx_timers_due ON timers (status, due_at);
CREATE INDEX idx_timers_node ON timers (node_instance_id, status);
CREATE INDEX idx_timers_instance ON timers (instance_id);

CREATE TABLE outbox (
  seq BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
  tenant_id VARCHAR(64) NOT NULL,
  kind VARCHAR(32) NOT NULL,
  ref VARCHAR(128) NOT NULL,
  payload LONGTEXT NOT NULL,
  created_at DATETIME(6) NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE cc (
  id VARCHAR(80) NOT NULL PRIMARY KEY,
  tenant_id VARCHAR(64) NOT NULL,
  instance_id VARCHAR(64) NOT NULL,
  node_id VARCHAR(128) NOT NULL,
  username VARCHAR(200) NOT NULL,
  created_at DATETIME(6) NOT NULL,
  read_at DATETIME(6) NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE INDEX idx_cc_user ON cc (tenant_id, username, id);
CREATE INDEX idx_cc_instance ON cc (instance_id, username);

CREATE TABLE plugin_runs (
  id VARCHAR(80) NOT NULL PRIMARY KEY,
  tenant_id VARCHAR(64) NOT NULL,
  plugin VARCHAR(64) NOT NULL,
  version INT NOT NULL,
  instance_id VARCHAR(64) NOT NULL,
  node_id VARCHAR(128) NOT NULL,
  node_instance_id VARCHAR(80) NOT NULL,
  phase VARCHAR(8) NOT NULL,
  status VARCHAR(16) NOT NULL,
  attempt INT NOT NULL,
  exit_code INT NULL,
  input LONGTEXT NOT NULL,
  output LONGTEXT NOT NULL,
  error TEXT NOT NULL,
  stdout LONGTEXT NOT NULL,
  stderr LONGTEXT NOT NULL,
  lease_owner VARCHAR(128) NOT NULL,
  lease_until DATETIME(6) NULL,
  created_at DATETIME(6) NOT NULL,
  started_at DATETIME(6) NULL,
  ended_at DATETIME(6) NULL,
  duration_ms BIGINT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE INDEX idx_plugin_runs_claim ON plugin_runs (status, lease_until);
CREATE INDEX idx_plugin_runs_plugin ON plugin_runs (tenant_id, plugin, created_at);
CREATE INDEX idx_plugin_runs_instance ON plugin_runs (instance_id);
