-- Halley schema: approval rules (API.md "Approval rules", "Delegation", "Urge").
-- tasks.auto: the task was decided automatically (no approver, self approval, dedupe); history says why.
-- tasks.delegated_from: the user the task was meant for, who delegated it to the assignee (out of office).
-- tasks.urged_at: when the instance was last urged while the task was pending.
-- delegations: a user's delegation of their new tasks to another user within [starts_at, ends_at), for every
-- template or those listed in templates (a JSON array of keys, '[]' for all).

ALTER TABLE tasks ADD COLUMN auto BOOLEAN NOT NULL DEFAULT FALSE;
ALTER TABLE tasks ADD COLUMN delegated_from VARCHAR(200) NOT NULL DEFAULT '';
ALTER TABLE tasks ADD COLUMN urged_at DATETIME(6) NULL;
CREATE INDEX tasks_delegated_from ON tasks (tenant_id, delegated_from);

CREATE TABLE delegations (
  id VARCHAR(36) NOT NULL PRIMARY KEY,
  tenant_id VARCHAR(64) NOT NULL,
  from_user VARCHAR(200) NOT NULL,
  to_user VARCHAR(200) NOT NULL,
  starts_at DATETIME(6) NOT NULL,
  ends_at DATETIME(6) NOT NULL,
  templates TEXT NOT NULL,
  reason VARCHAR(500) NOT NULL,
  created_by VARCHAR(200) NOT NULL,
  created_at DATETIME(6) NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
CREATE INDEX delegations_from ON delegations (tenant_id, from_user, ends_at);
CREATE INDEX delegations_to ON delegations (tenant_id, to_user, ends_at);
