-- Halley schema, migration 21: indexes that a timer fire does not move.
-- A fire closes its bookmark (closed_at) and marks its timer fired (status). Two indexes held those columns only
-- to narrow lookups that already name an instance or a node visit, so each fire moved an entry in each of them —
-- a random index page dirtied and a delete-marked entry left for purge, per fire, at a million rows. They now hold
-- the instance id and the node visit id alone; the lookups (an instance's open bookmarks, a node visit's timers)
-- read the few rows of their instance or visit and check closed_at / status on the row
-- (docs/benchmarks.md, "Indexes a fire does not move"). The new index is built before the old one is dropped, so
-- the lookups have an index all along; MariaDB builds it without blocking writes.

CREATE INDEX idx_bookmarks_of_instance ON bookmarks (instance_id);
DROP INDEX idx_bookmarks_instance ON bookmarks;
CREATE INDEX idx_timers_of_node ON timers (node_instance_id);
DROP INDEX idx_timers_node ON timers;
