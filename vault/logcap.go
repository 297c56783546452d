package vault

import "github.com/go-logr/logr"

// bodyLevel is the verbosity at which client-go logs the bodies of
// requests and responses through the logger of the request's context: a
// TokenRequest's answer is a token, a Secret's a kubeconfig. A handler's
// logger stops below it, so that no verbosity shows a secret a handler's
// client-go requests carry.
const bodyLevel = 8

// belowBodies is log with its levels from bodyLevel up dropped.
func belowBodies(log logr.Logger) logr.Logger {
	if log.GetSink() == nil {
		return log
	}
	return log.WithSink(cappedSink{log.GetSink()})
}

// cappedSink passes on the lines of levels below bodyLevel.
type cappedSink struct{ logr.LogSink }

func (s cappedSink) Enabled(level int) bool {
	return level < bodyLevel && s.LogSink.Enabled(level)
}

func (s cappedSink) Info(level int, msg string, keysAndValues ...any) {
	if level < bodyLevel {
		s.LogSink.Info(level, msg, keysAndValues...)
	}
}

func (s cappedSink) WithValues(keysAndValues ...any) logr.LogSink {
	return cappedSink{s.LogSink.WithValues(keysAndValues...)}
}

func (s cappedSink) WithName(name string) logr.LogSink {
	return cappedSink{s.LogSink.WithName(name)}
}
