package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// slowQuery is how long a query gorm runs may take before it is logged as slow.
const slowQuery = time.Second

// gormLogger routes gorm's log through slog. Failed statements are logged at debug level only: the store wraps
// and returns every error, and its caller logs it once. Slow statements are warnings, with placeholders instead
// of values (values may be personal data).
type gormLogger struct {
	lg   *slog.Logger
	slow time.Duration
}

var _ logger.Interface = gormLogger{}
var _ gorm.ParamsFilter = gormLogger{}

func newGormLogger(lg *slog.Logger) gormLogger {
	return gormLogger{lg: lg.With("component", "gorm"), slow: slowQuery}
}

func (l gormLogger) LogMode(logger.LogLevel) logger.Interface { return l }

func (l gormLogger) Info(ctx context.Context, msg string, data ...any) {
	l.lg.InfoContext(ctx, fmt.Sprintf(msg, data...))
}

func (l gormLogger) Warn(ctx context.Context, msg string, data ...any) {
	l.lg.WarnContext(ctx, fmt.Sprintf(msg, data...))
}

func (l gormLogger) Error(ctx context.Context, msg string, data ...any) {
	l.lg.ErrorContext(ctx, fmt.Sprintf(msg, data...))
}

func (l gormLogger) Trace(ctx context.Context, begin time.Time, fc func() (string, int64), err error) {
	elapsed := time.Since(begin)
	switch {
	case err != nil && !errors.Is(err, gorm.ErrRecordNotFound):
		if l.lg.Enabled(ctx, slog.LevelDebug) {
			sql, rows := fc()
			l.lg.DebugContext(ctx, "sql statement failed", "sql", sql, "rows", rows, "duration", elapsed, "err", err)
		}
	case elapsed > l.slow:
		sql, rows := fc()
		l.lg.WarnContext(ctx, "slow sql statement", "sql", sql, "rows", rows, "duration", elapsed)
	}
}

// ParamsFilter keeps values out of the logged SQL.
func (l gormLogger) ParamsFilter(_ context.Context, sql string, _ ...any) (string, []any) {
	return sql, nil
}
