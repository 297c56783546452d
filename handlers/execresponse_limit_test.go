package handlers

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/authvault/authvault/login"
)

// A WWW-Authenticate header past 4 KiB (net/http allows megabytes; one
// environment string may not pass 128 KiB on Linux) is left out of the
// plugin's exec info: the plugin still runs.
func TestHugeChallengeIsLeftOutOfTheExecInfo(t *testing.T) {
	cfg, _ := plugin(t, "token")
	cfg.ProvideResponse = true
	huge := "Bearer realm=\"api\", error_description=\"" + strings.Repeat("x", 200<<10) + "\""
	ctx := login.WithReason(context.Background(), login.Reason{Kind: login.Rejected, StatusCode: 401, Challenge: huge})
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if _, err := Exec(cfg)(ctx); err != nil {
		t.Errorf("Exec after a 401 with a %d KiB WWW-Authenticate: %v; want the plugin to run (the challenge cut or left out)", len(huge)>>10, err)
	}
}
