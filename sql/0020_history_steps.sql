-- Halley schema, migration 20: one history row per step.
-- A step's events are written as one row: the first event in the row's columns, as before, and the step's further
-- events, oldest first, in more_events as a JSON array of {"at","actor","action","node_id","task_id","comment",
-- "data"} (a member equal to the row's own at or actor, an empty string or an empty data object is left out).
-- NULL when the step made one event, and in every row written before this migration. The store expands the rows
-- when it reads history (GET /instances/{id}/history, the archive): every reader sees one item per event, as
-- before. A timer fire wrote five rows and now writes one (docs/benchmarks.md, "One history row per step").

ALTER TABLE history ADD COLUMN more_events LONGTEXT NULL;
