package side

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/authvault/authvault/hack/soak/wire"
	"github.com/authvault/authvault/testkit/testwait"
)

// running is a side's process, as the harness runs it: this test binary
// with SOAK_ROLE and SOAK_CONFIG, its Records read from its stdout.
type running struct {
	side  *testSide
	cmd   *exec.Cmd
	stdin interface{ Close() error }
	read  chan struct{} // closed when stdout is read to its end

	mu       sync.Mutex // guards what follows
	samples  []wire.Sample
	failures []wire.Failure
	out      bytes.Buffer // stdout, whole
	errOut   lockedBuffer
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// start starts the side s in a process of its own, with its token file
// kept fresh until the test ends.
func start(t *testing.T, s *testSide) *running {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	r := &running{side: s, read: make(chan struct{})}
	r.cmd = exec.Command(exe)
	r.cmd.Env = append(os.Environ(), wire.RoleEnv+"="+s.cfg.Side, wire.ConfigEnv+"="+mustJSON(s.cfg))
	r.cmd.Stderr = &r.errOut
	stdin, err := r.cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := r.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r.stdin = stdin
	go func() {
		defer close(r.read)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var rec wire.Record
			err := json.Unmarshal(sc.Bytes(), &rec)
			r.mu.Lock()
			r.out.Write(sc.Bytes())
			r.out.WriteByte('\n')
			switch {
			case err != nil:
				t.Errorf("%s: a line that is no Record: %v", s.cfg.Side, err)
			case rec.Sample != nil:
				r.samples = append(r.samples, *rec.Sample)
			case rec.Failure != nil:
				r.failures = append(r.failures, *rec.Failure)
			}
			r.mu.Unlock()
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.refreshTokenFile(t, ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
		if r.cmd.ProcessState == nil { // a test that failed before stop
			_ = r.cmd.Process.Kill()
			_ = r.cmd.Wait()
		}
	})
	return r
}

// stop closes the side's stdin, which ends its Run, and waits for its
// exit: 0, with every goroutine of Run ended.
func (r *running) stop(t *testing.T) {
	t.Helper()
	_ = r.stdin.Close()
	exited := make(chan error, 1)
	go func() { exited <- r.cmd.Wait() }()
	select {
	case err := <-exited:
		var exit *exec.ExitError
		switch {
		case errors.As(err, &exit) && exit.ExitCode() == sideLeaked:
			t.Errorf("%s: goroutines of Run outlived it:\n%s", r.side.cfg.Side, r.errOut.String())
		case err != nil:
			t.Errorf("%s: %v\n%s", r.side.cfg.Side, err, r.errOut.String())
		}
	case <-time.After(2 * testwait.Hang): // the manager's shutdown and the vault's each take up to one
		_ = r.cmd.Process.Kill()
		<-exited
		t.Fatalf("%s: still running %v after its stdin closed", r.side.cfg.Side, 2*testwait.Hang)
	}
	<-r.read
}

// last is the side's last Sample, if any.
func (r *running) last() (wire.Sample, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.samples) == 0 {
		return wire.Sample{}, false
	}
	return r.samples[len(r.samples)-1], true
}

// failuresNow are the side's Failures so far.
func (r *running) failuresNow() []wire.Failure {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]wire.Failure(nil), r.failures...)
}

// waitFor waits until cond holds of the side's last Sample, for at most
// bound; false when it never did.
func (r *running) waitFor(bound time.Duration, cond func(wire.Sample) bool) bool {
	deadline := time.Now().Add(bound)
	for time.Now().Before(deadline) {
		if s, ok := r.last(); ok && cond(s) {
			return true
		}
		time.Sleep(200 * time.Millisecond)
	}
	return false
}

// settled is a side that has joined the three clusters and served each
// kind of request.
func settled(s wire.Sample) bool {
	return s.Clusters == 3 && s.Successes[compHub] > 0 && s.Successes[compWatch] > 0 &&
		s.Successes[compExec] > 0 && s.Successes[compAddon] > 0 && s.Successes[compFleet] > 0 && s.Reconciled > 0
}

// checkNoSecret fails the test if the side's output, stderr or log file
// holds any token issued for it.
func (r *running) checkNoSecret(t *testing.T) {
	t.Helper()
	log, err := os.ReadFile(r.side.cfg.LogFile)
	if err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	out := r.out.String()
	r.mu.Unlock()
	for _, tok := range r.side.issued() {
		for where, text := range map[string]string{"records": out, "stderr": r.errOut.String(), "log file": string(log)} {
			if strings.Contains(text, tok) {
				t.Errorf("%s: its %s hold a token it was issued", r.side.cfg.Side, where)
			}
		}
	}
}
