-- Halley schema, migration 19: a python plugin version may opt out of the warm runtime.
-- warm: TRUE (default) — its runs are forked from the sandboxed fork server of its interpreter; FALSE — every run
-- spawns a fresh interpreter, as binaries always do (docs/plugins.md, "Python runs are forked from a warm
-- interpreter"). Uploaded with the multipart field warm=false.

ALTER TABLE plugins ADD COLUMN warm BOOLEAN NOT NULL DEFAULT TRUE;
