package webrtc

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/pion/logging"
)

// pionLogs routes pion's logs into slog: errors as errors, warnings as info (pion warns about
// routine things, such as ICE checks before the first remote candidate), the rest at debug.
type pionLogs struct{ log *slog.Logger }

func (f pionLogs) NewLogger(scope string) logging.LeveledLogger {
	return pionLogger{log: f.log.With("pion", scope)}
}

type pionLogger struct{ log *slog.Logger }

func (l pionLogger) at(level slog.Level, msg string) {
	if l.log.Enabled(context.Background(), level) {
		l.log.Log(context.Background(), level, msg)
	}
}

func (l pionLogger) atf(level slog.Level, format string, args ...any) {
	if l.log.Enabled(context.Background(), level) {
		l.log.Log(context.Background(), level, fmt.Sprintf(format, args...))
	}
}

func (l pionLogger) Trace(msg string)                  { l.at(slog.LevelDebug-4, msg) }
func (l pionLogger) Tracef(format string, args ...any) { l.atf(slog.LevelDebug-4, format, args...) }
func (l pionLogger) Debug(msg string)                  { l.at(slog.LevelDebug, msg) }
func (l pionLogger) Debugf(format string, args ...any) { l.atf(slog.LevelDebug, format, args...) }
func (l pionLogger) Info(msg string)                   { l.at(slog.LevelDebug, msg) }
func (l pionLogger) Infof(format string, args ...any)  { l.atf(slog.LevelDebug, format, args...) }
func (l pionLogger) Warn(msg string)                   { l.at(slog.LevelInfo, msg) }
func (l pionLogger) Warnf(format string, args ...any)  { l.atf(slog.LevelInfo, format, args...) }
func (l pionLogger) Error(msg string)                  { l.at(slog.LevelError, msg) }
func (l pionLogger) Errorf(format string, args ...any) { l.atf(slog.LevelError, format, args...) }
