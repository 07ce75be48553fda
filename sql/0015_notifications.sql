-- Halley schema: notifications to people (API.md "Notifications").
-- notification_channels: an admin's channel (smtp, dingtalk, feishu, wecom, webhook) by name. config holds the
-- public fields as JSON; secrets holds the secret fields (passwords, signing secrets, robot webhook URLs, which
-- carry their access token) as JSON sealed with a key derived from HALLEY_SECRET. sent_log is the channel's
-- rate-limit window: the unix milliseconds of its recent sends, read and written under the row's lock so that
-- every replica together stays within the channel's rate.
-- notifications: a user's in-app notifications. dedupe_key names the outbox event (or the digest day) it came
-- from, so that dispatching an outbox batch again adds nothing.
-- notification_deliveries: one message to one recipient through one channel, with its attempts; message is the
-- rendered message (JSON). While a delivery is in flight next_attempt_at holds its lease expiry.
-- notification_settings: a tenant's settings document (PUT /notification-settings).

CREATE TABLE notification_channels (
  tenant_id VARCHAR(64) NOT NULL,
  name VARCHAR(64) NOT NULL,
  kind VARCHAR(16) NOT NULL,
  config TEXT NOT NULL,
  secrets TEXT NOT NULL,
  sent_log TEXT NOT NULL,
  created_by VARCHAR(200) NOT NULL,
  created_at DATETIME(6) NOT NULL,
  PRIMARY KEY (tenant_id, name)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE notifications (
  id VARCHAR(36) NOT NULL PRIMARY KEY,
  tenant_id VARCHAR(64) NOT NULL,
  username VARCHAR(200) NOT NULL,
  dedupe_key VARCHAR(128) NOT NULL,
  event VARCHAR(64) NOT NULL,
  instance_id VARCHAR(64) NOT NULL,
  task_id VARCHAR(80) NOT NULL,
  title VARCHAR(500) NOT NULL,
  node_name VARCHAR(200) NOT NULL,
  message TEXT NOT NULL,
  link VARCHAR(500) NOT NULL,
  created_at DATETIME(6) NOT NULL,
  read_at DATETIME(6) NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE UNIQUE INDEX idx_notifications_key ON notifications (tenant_id, username, dedupe_key);

CREATE INDEX idx_notifications_user ON notifications (tenant_id, username, created_at, id);

CREATE INDEX idx_notifications_created ON notifications (created_at);

CREATE TABLE notification_deliveries (
  id VARCHAR(36) NOT NULL PRIMARY KEY,
  tenant_id VARCHAR(64) NOT NULL,
  channel VARCHAR(64) NOT NULL,
  kind VARCHAR(16) NOT NULL,
  recipient VARCHAR(200) NOT NULL,
  dedupe_key VARCHAR(128) NOT NULL,
  event VARCHAR(64) NOT NULL,
  instance_id VARCHAR(64) NOT NULL,
  task_id VARCHAR(80) NOT NULL,
  message LONGTEXT NOT NULL,
  status VARCHAR(16) NOT NULL,
  attempts INT NOT NULL,
  last_error TEXT NOT NULL,
  next_attempt_at DATETIME(6) NOT NULL,
  created_at DATETIME(6) NOT NULL,
  last_attempt_at DATETIME(6) NULL,
  finished_at DATETIME(6) NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE UNIQUE INDEX idx_notification_deliveries_key ON notification_deliveries (tenant_id, channel, recipient, dedupe_key);

CREATE INDEX idx_notification_deliveries_due ON notification_deliveries (status, next_attempt_at);

CREATE INDEX idx_notification_deliveries_channel ON notification_deliveries (tenant_id, channel, status, next_attempt_at);

CREATE INDEX idx_notification_deliveries_log ON notification_deliveries (tenant_id, created_at, id);

CREATE TABLE notification_settings (
  tenant_id VARCHAR(64) NOT NULL PRIMARY KEY,
  settings TEXT NOT NULL,
  updated_by VARCHAR(200) NOT NULL,
  updated_at DATETIME(6) NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
