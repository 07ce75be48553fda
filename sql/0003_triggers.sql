-- Halley schema, migration 3: start triggers.
-- api_triggers: which template owns each sync/async API route (module + function are unique per tenant).
-- trigger_log: what start triggers did besides starting instances (skipped crontab fires, closed windows).

CREATE TABLE api_triggers (
  tenant_id VARCHAR(64) NOT NULL,
  module VARCHAR(128) NOT NULL,
  func VARCHAR(128) NOT NULL,
  tkey VARCHAR(64) NOT NULL,
  version INT NOT NULL,
  PRIMARY KEY (tenant_id, module, func)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE INDEX idx_api_triggers_template ON api_triggers (tenant_id, tkey);

CREATE TABLE trigger_log (
  seq BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
  tenant_id VARCHAR(64) NOT NULL,
  tkey VARCHAR(64) NOT NULL,
  version INT NOT NULL,
  kind VARCHAR(32) NOT NULL,
  action VARCHAR(32) NOT NULL,
  at DATETIME(6) NOT NULL,
  instance_id VARCHAR(64) NOT NULL,
  detail TEXT NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE INDEX idx_trigger_log_template ON trigger_log (tenant_id, tkey, seq);
