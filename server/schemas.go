package server

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"
	"github.com/halley-bpm/halley/model"
)

// schemaETag identifies the definition schema this binary carries; it changes only with the binary.
var schemaETag = func() string {
	sum := sha256.Sum256([]byte(model.DefinitionSchema))
	return `"` + hex.EncodeToString(sum[:12]) + `"`
}()

// definitionSchema serves the JSON Schema of a template definition (GET /api/v1/schemas/definition.json). It is
// public: it describes the format, not this server's data. Clients may cache it for an hour and then revalidate
// with its ETag (a 304 costs nothing).
func (s *Server) definitionSchema(c *gin.Context) {
	c.Header("Cache-Control", "public, max-age=3600")
	c.Header("ETag", schemaETag)
	if etagMatches(c.GetHeader("If-None-Match"), schemaETag) {
		c.Status(http.StatusNotModified)
		return
	}
	c.Data(http.StatusOK, "application/schema+json", []byte(model.DefinitionSchema))
}

// etagMatches reports whether an If-None-Match header names etag (or is "*").
func etagMatches(header, etag string) bool {
	for part := range strings.SplitSeq(header, ",") {
		part = strings.TrimPrefix(strings.TrimSpace(part), "W/")
		if part == etag || part == "*" {
			return true
		}
	}
	return false
}
