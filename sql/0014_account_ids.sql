-- Halley schema, migration 14: accounts are told apart by an id that is never reused, and usernames are unique
-- regardless of letter case and Unicode compatibility forms (docs/credentials.md).
-- users.account_id: a random id given when the account is created; every login token carries it, so a user
-- deleted and created again under the same name does not get the first one's sessions back.
-- api_tokens.owner_id: the owner's account_id when the token was made; the token works only for that account.
-- users.username_key: the NFKC case fold of the username, unique per tenant ("Admin" beside "admin" is refused).
-- Both ids and the keys are computed by Halley right after these statements (SQL has no NFKC case fold): every
-- existing user gets an id, every token with an owner that exists gets that owner's id, and every user gets the
-- key of their name unless an older user already holds it. Such a user keeps a NULL key (NULLs do not collide)
-- and is named in a warning at this and at every later start until one of the two is deleted: nothing is renamed
-- or removed. Login stays exact: it looks the username up as typed.

ALTER TABLE users ADD COLUMN account_id VARCHAR(36) NOT NULL DEFAULT '';
ALTER TABLE users ADD COLUMN username_key VARCHAR(255) NULL;
CREATE UNIQUE INDEX idx_users_username_key ON users (tenant_id, username_key);
ALTER TABLE api_tokens ADD COLUMN owner_id VARCHAR(36) NOT NULL DEFAULT '';
