-- Halley schema, migration 1: tenants, identity, idempotency.
-- Written for MySQL/MariaDB; the SQLite schema is derived from this file by service/store (see dialect.go):
-- table options are dropped and AUTO_INCREMENT keys become INTEGER PRIMARY KEY AUTOINCREMENT.
-- Rules for every migration: one statement per `;` at the end of a line, indexes as separate CREATE INDEX
-- statements named idx_<table>_<what>, times as DATETIME(6) in UTC, JSON as LONGTEXT, utf8mb4_bin everywhere.

CREATE TABLE tenants (
  id VARCHAR(64) NOT NULL PRIMARY KEY,
  name VARCHAR(128) NOT NULL,
  created_at DATETIME(6) NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

INSERT INTO tenants (id, name, created_at) VALUES ('default', 'Default tenant', '2026-01-01 00:00:00');

CREATE TABLE users (
  tenant_id VARCHAR(64) NOT NULL,
  username VARCHAR(64) NOT NULL,
  password_hash VARCHAR(100) NOT NULL,
  display_name VARCHAR(128) NOT NULL,
  department VARCHAR(128) NOT NULL,
  manager VARCHAR(64) NOT NULL,
  roles VARCHAR(1024) NOT NULL,
  created_at DATETIME(6) NOT NULL,
  updated_at DATETIME(6) NOT NULL,
  PRIMARY KEY (tenant_id, username)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- user_roles indexes users by role (approver resolution by role); users.roles keeps the list as JSON.
CREATE TABLE user_roles (
  tenant_id VARCHAR(64) NOT NULL,
  role VARCHAR(64) NOT NULL,
  username VARCHAR(64) NOT NULL,
  PRIMARY KEY (tenant_id, role, username)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE departments (
  tenant_id VARCHAR(64) NOT NULL,
  name VARCHAR(128) NOT NULL,
  leader VARCHAR(64) NOT NULL,
  parent VARCHAR(128) NOT NULL,
  created_at DATETIME(6) NOT NULL,
  PRIMARY KEY (tenant_id, name)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE api_tokens (
  id VARCHAR(36) NOT NULL PRIMARY KEY,
  tenant_id VARCHAR(64) NOT NULL,
  name VARCHAR(128) NOT NULL,
  token_hash CHAR(64) NOT NULL,
  roles VARCHAR(1024) NOT NULL,
  created_by VARCHAR(64) NOT NULL,
  created_at DATETIME(6) NOT NULL,
  revoked_at DATETIME(6) NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE UNIQUE INDEX idx_api_tokens_hash ON api_tokens (token_hash);

CREATE TABLE idempotency_keys (
  tenant_id VARCHAR(64) NOT NULL,
  username VARCHAR(200) NOT NULL,
  idem_key VARCHAR(255) NOT NULL,
  request_hash CHAR(64) NOT NULL,
  status_code INT NOT NULL,
  body LONGTEXT NOT NULL,
  created_at DATETIME(6) NOT NULL,
  PRIMARY KEY (tenant_id, username, idem_key)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE INDEX idx_idempotency_keys_created ON idempotency_keys (created_at);
