-- Halley schema, migration 10: message ids and message start triggers (API.md "Messages: ids and message start").
-- message_receipts: one row per message_id a sender gave POST /messages, kept 7 days (purged by the housekeeping
-- job through its created_at index). Its primary key is the claim: of several requests with one id only the one
-- that inserted the row acts; answer holds that request's answer (empty while it is still running), which the
-- others replay. A claim left empty past a minute (its request died) may be taken over.
-- message_triggers: which templates start on which message name: the latest published version of each
-- template whose start trigger is {"kind":"message"}, kept by the trigger service at every publish.

CREATE TABLE message_receipts (
  tenant_id VARCHAR(64) NOT NULL,
  message_id VARCHAR(128) NOT NULL,
  answer LONGTEXT NOT NULL,
  created_at DATETIME(6) NOT NULL,
  PRIMARY KEY (tenant_id, message_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE INDEX idx_message_receipts_created ON message_receipts (created_at);

CREATE TABLE message_triggers (
  tenant_id VARCHAR(64) NOT NULL,
  message VARCHAR(255) NOT NULL,
  tkey VARCHAR(64) NOT NULL,
  version INT NOT NULL,
  PRIMARY KEY (tenant_id, message, tkey)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE INDEX idx_message_triggers_template ON message_triggers (tenant_id, tkey);
