// Package nativefuzz is the harness of the cloud modules' fuzz targets of
// their native logins: a fuzzed exec section, and the checks that building
// its handler neither panics nor hangs and that an error quotes no secret.
package nativefuzz

import (
	"slices"
	"strings"
	"testing"
	"time"

	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/authvault/authvault/login"
)

// SecretMark starts the fuzzed values that count as secrets: a value that
// is also a flag's name or a common word may appear in an error for good
// reason, one that starts with this may not.
const SecretMark = "S3CR3T"

// Exec is the exec section of commands[command] (modulo their number) with
// args (split on NUL) and env (NAME=VALUE, split on NUL).
func Exec(commands []string, command uint8, args, env string) clientcmdapi.ExecConfig {
	return clientcmdapi.ExecConfig{Command: commands[int(command)%len(commands)], Args: splitArgs(args), Env: splitEnv(env)}
}

// Check builds a handler for exec with build, and fails t when that takes
// more than 5 s (far more than parsing a command line needs, so that a
// loaded machine does not fail it: a hang is reported with its input), when
// a handler comes with an error or none without one, or when the error does
// not start with prefix or quotes a marked secret of exec.
func Check(t *testing.T, prefix string, exec clientcmdapi.ExecConfig, build func() (login.Handler, error)) {
	t.Helper()
	h, err := buildWithin(t, 5*time.Second, build)
	checkBuilt(t, prefix, exec, h, err)
}

// splitArgs are the arguments s holds, NUL between them.
func splitArgs(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, "\x00")
}

// splitEnv are the variables s holds, NAME=VALUE, NUL between them.
func splitEnv(s string) []clientcmdapi.ExecEnvVar {
	var env []clientcmdapi.ExecEnvVar
	for _, kv := range splitArgs(s) {
		name, value, _ := strings.Cut(kv, "=")
		env = append(env, clientcmdapi.ExecEnvVar{Name: name, Value: value})
	}
	return env
}

// buildWithin is build's result, or a fatal error when it takes longer than
// limit (far more than parsing a command line needs, so that a loaded
// machine does not fail it): a hang is reported with its input.
func buildWithin(t *testing.T, limit time.Duration, build func() (login.Handler, error)) (login.Handler, error) {
	t.Helper()
	type built struct {
		h   login.Handler
		err error
	}
	done := make(chan built, 1)
	go func() {
		h, err := build()
		done <- built{h, err}
	}()
	select {
	case b := <-done:
		return b.h, b.err
	case <-time.After(limit):
		t.Fatalf("building the handler took more than %v", limit)
		return nil, nil
	}
}

// secretWords in a flag's name make its value a secret.
var secretWords = []string{"secret", "token", "password", "assertion", "certificate"}

// markedSecrets are the values of exec that are secrets and start with
// SecretMark: those of its variables, and those of its flags whose names
// say so (`--flag value` or `--flag=value`). A value that is also part of
// another argument, of a variable's name or of the command may appear in
// an error through that one, and is left out.
func markedSecrets(exec clientcmdapi.ExecConfig) []string {
	var secrets []string
	others := []string{exec.Command}
	for _, v := range exec.Env {
		secrets, others = append(secrets, v.Value), append(others, v.Name)
	}
	holds := make([]bool, len(exec.Args)) // a secret, inline or as the next argument
	for i, a := range exec.Args {
		name, value, inline := strings.Cut(a, "=")
		if !strings.HasPrefix(name, "-") || !containsAny(strings.ToLower(name), secretWords) {
			continue
		}
		switch {
		case inline:
			holds[i] = true
		case i+1 < len(exec.Args):
			value, holds[i+1] = exec.Args[i+1], true
		}
		secrets = append(secrets, value)
	}
	for i, a := range exec.Args {
		if !holds[i] {
			others = append(others, a)
		}
	}
	var marked []string
	for _, s := range secrets {
		if strings.HasPrefix(s, SecretMark) && !slices.ContainsFunc(others, func(o string) bool { return strings.Contains(o, s) }) {
			marked = append(marked, s)
		}
	}
	return marked
}

func containsAny(s string, words []string) bool {
	for _, w := range words {
		if strings.Contains(s, w) {
			return true
		}
	}
	return false
}

// checkBuilt fails t when a handler was built with an error, or none
// without one, or when the error does not start with prefix or quotes a
// marked secret of exec.
func checkBuilt(t *testing.T, prefix string, exec clientcmdapi.ExecConfig, h login.Handler, err error) {
	t.Helper()
	if err == nil {
		if h == nil {
			t.Fatal("no handler and no error")
		}
		return
	}
	if h != nil {
		t.Errorf("a handler with the error %v", err)
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, prefix) {
		t.Errorf("error %q does not start with %q", msg, prefix)
	}
	for _, s := range markedSecrets(exec) {
		if strings.Contains(msg, s) {
			t.Errorf("error %q quotes the secret %q", msg, s)
		}
	}
}
