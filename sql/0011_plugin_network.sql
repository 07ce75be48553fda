-- Halley schema, migration 11: a plugin version may run without network.
-- network: 'on' (default) or 'off' — an 'off' plugin runs in a network namespace of its own with no interface up
-- (docs/plugins.md, "Isolation"); a host that cannot create one fails its runs rather than give them the network.

ALTER TABLE plugins ADD COLUMN network VARCHAR(8) NOT NULL DEFAULT 'on';
