package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/gin-gonic/gin"
	mysqldriver "github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"

	"github.com/halley-bpm/halley/server/config"
	"github.com/halley-bpm/halley/service/tracing"
)

// newLogger builds the process's logger (HALLEY_LOG_LEVEL, HALLEY_LOG_FORMAT) and routes every library that
// logs on its own through it — go-redis, the MySQL driver, gin and the standard log package (gorm gets it from
// the store, gocron from the housekeeper) — so that with HALLEY_LOG_FORMAT=json every line is one JSON object.
func newLogger(cfg *config.Config, w io.Writer) *slog.Logger {
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(cfg.LogLevel))
	opts := &slog.HandlerOptions{Level: lvl}
	var h slog.Handler
	if cfg.LogFormat == "json" {
		h = slog.NewJSONHandler(w, opts)
	} else {
		h = slog.NewTextHandler(w, opts)
	}
	// A line logged with a context carries its request_id, trace_id and span_id.
	lg := slog.New(tracing.LogHandler(h))
	slog.SetDefault(lg) // the standard log package now writes through lg too
	redis.SetLogger(redisLogger{lg.With("component", "go-redis")})
	_ = mysqldriver.SetLogger(mysqlLogger{lg.With("component", "mysql-driver")})
	gin.SetMode(gin.ReleaseMode)
	gin.DefaultWriter = lineLogger{lg.With("component", "gin"), slog.LevelInfo}
	gin.DefaultErrorWriter = lineLogger{lg.With("component", "gin"), slog.LevelError}
	return lg
}

// redisLogger is go-redis's Logging on slog. go-redis logs only what went wrong (failed dials, dropped
// connections), so its lines are warnings.
type redisLogger struct{ lg *slog.Logger }

func (l redisLogger) Printf(ctx context.Context, format string, v ...any) {
	l.lg.WarnContext(ctx, strings.TrimSpace(fmt.Sprintf(format, v...)))
}

// mysqlLogger is the MySQL driver's Logger on slog; the driver logs only critical errors (a broken packet, a
// connection closed under it).
type mysqlLogger struct{ lg *slog.Logger }

func (l mysqlLogger) Print(v ...any) { l.lg.Error(strings.TrimSpace(fmt.Sprint(v...))) }

// lineLogger is an io.Writer that logs each line written to it (gin writes its messages to a writer).
type lineLogger struct {
	lg    *slog.Logger
	level slog.Level
}

func (l lineLogger) Write(p []byte) (int, error) {
	for _, line := range bytes.Split(p, []byte("\n")) {
		if s := strings.TrimSpace(string(line)); s != "" {
			l.lg.Log(context.Background(), l.level, s)
		}
	}
	return len(p), nil
}
