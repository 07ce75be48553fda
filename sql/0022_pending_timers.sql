-- Halley schema, migration 22: the index of pending timers in the order re-arming reads them.
-- Re-arming the scheduler from the database (at start, after Redis lost its data, and by the hourly housekeeping
-- pass) pages through the pending timers by id: `status = 'pending' AND id > ? ORDER BY id`. idx_timers_due held
-- (status, due_at), an order nobody reads (the scheduler keeps due order in Redis), so the pages were read through
-- the primary key instead, walking every fired and cancelled timer kept for the retention period besides the
-- pending ones. (status, id) reads the pending rows alone, in page order. A fire moves an entry of this index as
-- it moved one of the old (the status changes), a smaller one. Built before the old one is dropped.

CREATE INDEX idx_timers_pending ON timers (status, id);
DROP INDEX idx_timers_due ON timers;
