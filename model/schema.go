package model

import _ "embed" // the definition schema travels inside the binary

// DefinitionSchema is the JSON Schema (draft 2020-12) of a Definition: generated from the types of definition.go
// (their tags and doc comments) by service/graph/schemagen with `make generate`, checked against them by its tests,
// served at GET /api/v1/schemas/definition.json and compiled by service/graph to check definitions.
//
//go:embed definition.schema.json
var DefinitionSchema string
