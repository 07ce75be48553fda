-- Halley schema, migration 23: a message finds its bookmarks by (tenant_id, hash) alone.
-- idx_bookmarks_hash held (tenant_id, hash, closed_at), so closing any bookmark (every fired delay, every callback
-- and message that arrived) moved its entry in this index besides idx_bookmarks_closed. A message's lookup
-- (hash = ? AND closed_at IS NULL) now also reads the closed bookmarks of its hash, which the retention sweep
-- removes: few, since a hash is a message name and a correlation id. Replayed alone, closing 100 bookmarks a
-- statement cost MariaDB 21-25 us a close instead of 32-35 (docs/benchmarks.md, "A larger heap between
-- collections"). Built before the old one is dropped.

CREATE INDEX idx_bookmarks_message ON bookmarks (tenant_id, hash);
DROP INDEX idx_bookmarks_hash ON bookmarks;
