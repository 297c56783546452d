package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/authvault/authvault/hack/soak/wire"
)

// sideProc is a side running as a process of its own (the soak's binary in
// the side's role), so that its heap, goroutines, descriptors and
// connections are its own.
type sideProc struct {
	role  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   string // its records, as it wrote them
	err   string // its stderr
	done  chan struct{}

	mu       sync.Mutex // guards samples, failures, bad
	samples  []wire.Sample
	failures []wire.Failure
	bad      int // lines that were no record
}

func startSide(binary, dir string, cfg wire.Config) (*sideProc, error) {
	raw, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	s := &sideProc{role: cfg.Side, out: filepath.Join(dir, cfg.Side+".out"), err: filepath.Join(dir, cfg.Side+".err"), done: make(chan struct{})}
	// Appended to: a side started again (restartPeer) goes on where its
	// last process stopped, and the leak scan reads both.
	outFile, err := os.OpenFile(s.out, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	errFile, err := os.OpenFile(s.err, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		outFile.Close()
		return nil, err
	}
	s.cmd = exec.Command(binary)
	s.cmd.Env = append(os.Environ(), wire.RoleEnv+"="+cfg.Side, wire.ConfigEnv+"="+string(raw))
	s.cmd.Stderr = errFile
	stdout, err := s.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if s.stdin, err = s.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	if err := s.cmd.Start(); err != nil {
		outFile.Close()
		errFile.Close()
		return nil, fmt.Errorf("soak: starting the %s side: %w", cfg.Side, err)
	}
	go func() {
		defer close(s.done)
		defer outFile.Close()
		defer errFile.Close()
		s.read(io.TeeReader(stdout, outFile))
		_ = s.cmd.Wait()
	}()
	return s, nil
}

// read takes the side's records until its output ends.
func (s *sideProc) read(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var rec wire.Record
		err := json.Unmarshal(sc.Bytes(), &rec)
		s.mu.Lock()
		switch {
		case err != nil:
			s.bad++
		case rec.Sample != nil:
			s.samples = append(s.samples, *rec.Sample)
		case rec.Failure != nil:
			s.failures = append(s.failures, *rec.Failure)
		}
		s.mu.Unlock()
	}
}

// last is the side's latest sample.
func (s *sideProc) last() (wire.Sample, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.samples) == 0 {
		return wire.Sample{}, false
	}
	return s.samples[len(s.samples)-1], true
}

// exited says whether the side's process has ended.
func (s *sideProc) exited() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// stop asks the side to end (its standard input closes) and waits for it,
// killing it if it has not ended after wait: a side that hangs on its way
// out is a finding, reported, not a soak that never ends.
func (s *sideProc) stop(wait time.Duration) error {
	s.stdin.Close()
	select {
	case <-s.done:
	case <-time.After(wait):
		_ = s.cmd.Process.Kill()
		<-s.done
		return fmt.Errorf("soak: the %s side did not end within %v of being asked: killed", s.role, wait)
	}
	if st := s.cmd.ProcessState; st != nil && !st.Success() {
		return fmt.Errorf("soak: the %s side ended with %v (its stderr: %s)", s.role, st, s.err)
	}
	return nil
}

// kill ends the side's process at once (SIGKILL), as a node that dies
// does, and waits for its output to end.
func (s *sideProc) kill() {
	// Killed before its input closes: a closed input asks for a clean stop,
	// which would release the Lease.
	_ = s.cmd.Process.Kill()
	<-s.done
	s.stdin.Close()
}

// carry puts what old recorded before s's own records: the same side's
// earlier process, for the report.
func (s *sideProc) carry(old *sideProc) {
	old.mu.Lock()
	samples, failures, bad := slices.Clone(old.samples), slices.Clone(old.failures), old.bad
	old.mu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.samples = append(samples, s.samples...)
	s.failures = append(failures, s.failures...)
	s.bad += bad
}
