-- Halley schema, migration 9: a correlation id is unique among the running instances of a template (API.md,
-- "Security changes"), so that nobody can start an instance with another's correlation id and receive the messages
-- meant for it. The claim is a row of its own: written in the start's transaction (its primary key refuses a
-- second running instance: 409 correlation_taken, on SQLite and MySQL alike) and deleted in the transaction that
-- ends the instance. Keeping it out of the instances table keeps the unique check off the hot path of every
-- other step. Running instances that already share a correlation id keep running; the oldest holds the claim.

CREATE TABLE running_correlations (
  tenant_id VARCHAR(64) NOT NULL,
  tkey VARCHAR(64) NOT NULL,
  correlation_id VARCHAR(255) NOT NULL,
  instance_id VARCHAR(64) NOT NULL,
  PRIMARY KEY (tenant_id, tkey, correlation_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

INSERT INTO running_correlations (tenant_id, tkey, correlation_id, instance_id)
  SELECT tenant_id, tkey, correlation_id, MIN(id) FROM instances WHERE status = 'running' AND correlation_id <> ''
  GROUP BY tenant_id, tkey, correlation_id;
