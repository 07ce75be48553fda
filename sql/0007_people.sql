-- Halley schema, migration 7: people and their settings (API.md, "People and credentials").
-- disabled: a disabled user cannot log in, their tokens stop working and they get no new tasks.
-- password_change_required: set on the bootstrap admin while it has the default password; login says so.
-- language, email, mobile, im_id: what the user sets on PUT /me (notifications use them later).

ALTER TABLE users ADD COLUMN disabled BOOLEAN NOT NULL DEFAULT FALSE;
ALTER TABLE users ADD COLUMN password_change_required BOOLEAN NOT NULL DEFAULT FALSE;
ALTER TABLE users ADD COLUMN language VARCHAR(16) NOT NULL DEFAULT '';
ALTER TABLE users ADD COLUMN email VARCHAR(254) NOT NULL DEFAULT '';
ALTER TABLE users ADD COLUMN mobile VARCHAR(32) NOT NULL DEFAULT '';
ALTER TABLE users ADD COLUMN im_id VARCHAR(128) NOT NULL DEFAULT '';
