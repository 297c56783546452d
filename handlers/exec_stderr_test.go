package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// stderrSecret is what the test plugin's stderr-token modes print on stderr.
const stderrSecret = "stderr-secret-token-123"

// errorForms is every way an error may be printed or logged.
func errorForms(err error) map[string]string {
	j, jerr := json.Marshal(err)
	if jerr != nil {
		j = []byte("json error: " + jerr.Error())
	}
	return map[string]string{
		"Error()": err.Error(),
		"%v":      fmt.Sprintf("%v", err),
		"%+v":     fmt.Sprintf("%+v", err),
		"%#v":     fmt.Sprintf("%#v", err),
		"%s":      fmt.Sprintf("%s", err),
		"%q":      fmt.Sprintf("%q", err),
		"JSON":    string(j),
	}
}

// A plugin's stderr goes to ExecConfig.Stderr and nowhere else: not into
// the error in any printed form, however the plugin ends.
func TestExecStderrNeverInTheError(t *testing.T) {
	tests := []struct {
		mode, want string
		timeout    time.Duration
	}{
		{"stderr-token", "exited with code 1", 20 * time.Second},
		{"stderr-token-garbage", "output is not a JSON object", 20 * time.Second},
		{"stderr-token-killed", "was killed by signal killed", 20 * time.Second},
		{"stderr-token-sleep", "stopped", 500 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.mode, func(t *testing.T) {
			cfg, stderr := plugin(t, tt.mode)
			ctx, cancel := context.WithTimeout(context.Background(), tt.timeout)
			defer cancel()
			_, err := Exec(cfg)(ctx)
			if err == nil {
				t.Fatal("Exec() succeeded, want an error")
			}
			for form, s := range errorForms(err) {
				if strings.Contains(s, stderrSecret) || strings.Contains(s, "for debugging") {
					t.Errorf("error as %s = %s, quotes the plugin's stderr", form, s)
				}
			}
			msg := err.Error()
			for _, want := range []string{`handlers: exec plugin "` + pluginPath + `"`, tt.want} {
				if !strings.Contains(msg, want) {
					t.Errorf("error = %q, want it to contain %q", msg, want)
				}
			}
			if !strings.Contains(stderr.String(), stderrSecret) {
				t.Errorf("ExecConfig.Stderr got %q, want the plugin's stderr", stderr)
			}
		})
	}
}

// The error of a failed plugin says where its stderr went.
func TestExecErrorSaysWhereStderrWent(t *testing.T) {
	cfg, _ := plugin(t, "stderr-token")
	if _, err := run(t, cfg); err == nil || !strings.Contains(err.Error(), "stderr went to ExecConfig.Stderr (*bytes.Buffer)") {
		t.Errorf("error = %v, want it to say stderr went to ExecConfig.Stderr", err)
	}
	var sb strings.Builder
	cfg.Stderr = &sb
	if _, err := run(t, cfg); err == nil || !strings.Contains(err.Error(), "stderr went to ExecConfig.Stderr (*strings.Builder)") {
		t.Errorf("error = %v, want it to say stderr went to ExecConfig.Stderr", err)
	}
	f, err := os.Create(filepath.Join(t.TempDir(), "plugin.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cfg.Stderr = f
	if _, err := run(t, cfg); err == nil || !strings.Contains(err.Error(), "stderr went to ExecConfig.Stderr (file "+f.Name()+")") {
		t.Errorf("error = %v, want it to name the file stderr went to", err)
	}
	if got, _ := os.ReadFile(f.Name()); !strings.Contains(string(got), stderrSecret) {
		t.Errorf("the stderr file holds %q, want the plugin's stderr", got)
	}
	cfg, _ = plugin(t, "fail") // no secret on its stderr: this one reaches the test's output
	cfg.Stderr = nil
	if _, err := run(t, cfg); err == nil || !strings.Contains(err.Error(), "stderr went to this process's stderr") {
		t.Errorf("error = %v, want it to say stderr went to this process's stderr", err)
	}
}

// failingWriter fails every write.
type failingWriter struct{ calls int }

func (w *failingWriter) Write([]byte) (int, error) {
	w.calls++
	return 0, errors.New("disk full")
}

// A Stderr that fails does not block the plugin on a full pipe, nor fail
// the login; a plugin noisy on stderr is read to the end.
func TestExecStderrWriterFails(t *testing.T) {
	cfg, stderr := plugin(t, "noisy-stderr")
	if info, err := run(t, cfg); err != nil || info.Token != "plugin-token-1" || stderr.Len() < 1<<20-6 {
		t.Errorf("credential = %v, %v with %d bytes of stderr; want the token and all of stderr", info, err, stderr.Len())
	}
	w := &failingWriter{}
	cfg.Stderr = w
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if info, err := Exec(cfg)(ctx); err != nil || info.Token != "plugin-token-1" || w.calls != 1 {
		t.Errorf("credential = %v, %v after %d writes; want the token after one failed write", info, err, w.calls)
	}
}
