-- Halley schema, migration 5: event subscriptions and their webhook deliveries.
-- subscriptions: an admin's wish to receive an engine event (or every event, '*'), optionally only for one
-- template (tkey = '' means any), delivered to exactly one of a plugin or a webhook URL. secret signs webhook
-- bodies; it may be sealed with a key derived from HALLEY_SECRET (prefix "sealed:v1:").
-- subscription_deliveries: one row per (subscription, outbox event); the unique key makes re-dispatching an
-- outbox batch harmless. While a delivery is in flight next_attempt_at holds its lease expiry, so a delivery
-- held by a dead replica becomes due again by itself.

CREATE TABLE subscriptions (
  id VARCHAR(36) NOT NULL PRIMARY KEY,
  tenant_id VARCHAR(64) NOT NULL,
  event VARCHAR(64) NOT NULL,
  tkey VARCHAR(64) NOT NULL,
  plugin VARCHAR(64) NOT NULL,
  webhook_url VARCHAR(2048) NOT NULL,
  secret VARCHAR(1024) NOT NULL,
  created_by VARCHAR(200) NOT NULL,
  created_at DATETIME(6) NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE INDEX idx_subscriptions_tenant ON subscriptions (tenant_id, created_at, id);

CREATE TABLE subscription_deliveries (
  id VARCHAR(36) NOT NULL PRIMARY KEY,
  tenant_id VARCHAR(64) NOT NULL,
  subscription_id VARCHAR(36) NOT NULL,
  outbox_key VARCHAR(64) NOT NULL,
  event VARCHAR(64) NOT NULL,
  instance_id VARCHAR(64) NOT NULL,
  body LONGTEXT NOT NULL,
  status VARCHAR(16) NOT NULL,
  attempts INT NOT NULL,
  status_code INT NOT NULL,
  last_error TEXT NOT NULL,
  next_attempt_at DATETIME(6) NOT NULL,
  created_at DATETIME(6) NOT NULL,
  last_attempt_at DATETIME(6) NULL,
  finished_at DATETIME(6) NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE UNIQUE INDEX idx_subscription_deliveries_key ON subscription_deliveries (subscription_id, outbox_key);

CREATE INDEX idx_subscription_deliveries_due ON subscription_deliveries (status, next_attempt_at);

CREATE INDEX idx_subscription_deliveries_log ON subscription_deliveries (subscription_id, created_at, id);

CREATE INDEX idx_subscription_deliveries_created ON subscription_deliveries (created_at);
