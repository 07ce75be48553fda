// Package sql holds Halley's schema as numbered migrations (NNNN_name.sql), written for MySQL/MariaDB and applied
// at start by service/store, which also derives the SQLite schema from them.
package sql

import "embed"

// Migrations are the *.sql files of this folder.
//
//go:embed *.sql
var Migrations embed.FS
