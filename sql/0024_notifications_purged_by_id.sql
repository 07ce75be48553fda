-- Halley schema, migration 24: notifications are purged by their primary key.
-- A notification's id is a UUIDv7 stamped with its created_at (model.TimeIDs), so the retention purge deletes the
-- notifications before a cutoff as a range of the primary key (with created_at checked on each row) and
-- idx_notifications_created, an entry written by every step that notifies someone, has nothing left to serve.
-- The finished notification deliveries are purged the same way (their ids are stamped alike); they had no index on
-- created_at, so that purge read the whole table. Ids written before this migration were stamped with the wall
-- clock, as created_at was; only the builds of the first day of notifications (before 6600185, 2026-11-28, never
-- released) wrote random ids, and such a row is purged only once its id sorts below a cutoff.

DROP INDEX idx_notifications_created ON notifications;
