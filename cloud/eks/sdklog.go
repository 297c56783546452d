package eks

import (
	"context"
	"fmt"

	"github.com/aws/smithy-go/logging"
	"github.com/go-logr/logr"

	"github.com/authvault/authvault/redact"
)

// sdkLogger is the AWS SDK's logger for the configurations a handler loads:
// the SDK's own lines (its WARN "falling back to IMDSv1", a DEBUG line about
// a profile of the shared config it ignores) go to the logger of the call
// that logs them, the handler's (logr.FromContext), not to stderr, where the
// SDK's default logger writes them. Its base logger is for the lines logged
// with no context, while a configuration loads.
type sdkLogger struct{ log logr.Logger }

// WithContext is the logger of a call under ctx: logging.ContextLogger.
func (l sdkLogger) WithContext(ctx context.Context) logging.Logger {
	if log, err := logr.FromContext(ctx); err == nil {
		return sdkLogger{log: log}
	}
	return l
}

// Logf logs a WARN line at INFO, any other at V(1), with URL user info
// redacted. The lines that could show a credential (a request or a
// signature dumped) come only with aws.Config.ClientLogMode, which the
// configurations this logger serves do not set.
func (l sdkLogger) Logf(c logging.Classification, format string, v ...any) {
	msg := redact.URL(fmt.Sprintf(format, v...))
	if c == logging.Warn {
		l.log.Info("AWS SDK warning", "message", msg)
		return
	}
	l.log.V(1).Info("AWS SDK message", "message", msg, "classification", string(c))
}
