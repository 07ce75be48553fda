package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log"
	"log/slog"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/halley-bpm/halley/server/config"
)

// TestJSONLogsRouteTheLibraries: with HALLEY_LOG_FORMAT=json, what the standard log package, gin's writers and the
// MySQL driver's and go-redis's loggers write comes out as JSON lines of the same logger.
func TestJSONLogsRouteTheLibraries(t *testing.T) {
	defer slog.SetDefault(slog.Default())
	var buf bytes.Buffer
	lg := newLogger(&config.Config{LogFormat: "json", LogLevel: "info"}, &buf)
	log.Printf("from the standard log package")
	fmt.Fprintln(gin.DefaultWriter, "[GIN-debug] a gin message")
	fmt.Fprintln(gin.DefaultErrorWriter, "[GIN] an error\nover two lines")
	mysqlLogger{lg.With("component", "mysql-driver")}.Print("packets.go:58 unexpected EOF")
	redisLogger{lg.With("component", "go-redis")}.Printf(t.Context(), "redis: connection pool: failed to dial after %d attempts", 5)
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 6 {
		t.Fatalf("%d lines, want 6:\n%s", len(lines), buf.String())
	}
	want := []string{"from the standard log package", "[GIN-debug] a gin message", "[GIN] an error", "over two lines",
		"packets.go:58 unexpected EOF", "redis: connection pool: failed to dial after 5 attempts"}
	for i, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("line %d is not JSON: %q", i, l)
		}
		if m["msg"] != want[i] || m["time"] == nil || m["level"] == nil {
			t.Errorf("line %d = %v, want msg %q", i, m, want[i])
		}
	}
}
