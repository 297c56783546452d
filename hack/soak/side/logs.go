package side

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/go-logr/logr"
	"go.uber.org/zap/zapcore"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// logs is where every logger of the process writes: controller-runtime's
// and klog's, which a process sets once, and the side's own. Run points it
// at its LogFile.
var logs = &logFile{out: io.Discard}

// logFile counts the lines written through it; one log entry is one line
// (zap's JSON encoder escapes the newlines inside one).
type logFile struct {
	mu  sync.Mutex // guards out
	out io.Writer

	lines atomic.Int64
}

func (l *logFile) Write(p []byte) (int, error) {
	l.lines.Add(int64(bytes.Count(p, []byte{'\n'})))
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.out.Write(p)
}

// to makes w the destination.
func (l *logFile) to(w io.Writer) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.out = w
}

var (
	setLoggers sync.Once
	logger     logr.Logger
)

// openLogs points every logger of the process at path, appended to, at
// the default level (INFO, klog's V(0)), and returns the side's logger
// and what closes the file.
func openLogs(path string) (logr.Logger, func(), error) {
	setLoggers.Do(func() {
		// No stack traces: an error expected during a fault is one line,
		// as the library logs it.
		opts := []zap.Opts{zap.WriteTo(logs), zap.StacktraceLevel(zapcore.PanicLevel)}
		if v := verbosity(); v > 0 {
			opts = append(opts, zap.Level(zapcore.Level(-v)))
			fs := flag.NewFlagSet("klog", flag.ContinueOnError)
			klog.InitFlags(fs)
			_ = fs.Set("v", strconv.Itoa(v))
		}
		logger = zap.New(opts...)
		ctrl.SetLogger(logger)
		klog.SetLogger(logger)
	})
	logs.lines.Store(0)
	if path == "" {
		logs.to(io.Discard)
		return logger, func() {}, nil
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return logr.Logger{}, nil, fmt.Errorf("soak: the log file: %w", err)
	}
	logs.to(f)
	return logger, func() {
		logs.to(io.Discard)
		_ = f.Close()
	}, nil
}

// verbosityEnv raises the level of every logger of the side, for a
// diagnosis: SOAK_LOG_V=4 logs the library's V(1) lines and client-go's
// (klog's) up to V(4). Unset, or not a positive number: the default level,
// which the soak's figures of log lines per hour are about.
const verbosityEnv = "SOAK_LOG_V"

func verbosity() int {
	v, err := strconv.Atoi(os.Getenv(verbosityEnv))
	if err != nil || v < 0 {
		return 0
	}
	return v
}
