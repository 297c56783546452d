// Package plugin is the soak's exec credential plugin: the soak's binary,
// run by a side's vault or client-go with SOAK_ROLE=plugin, fetches a token
// from the side's token endpoint (SOAK_PLUGIN_URL, served by the harness,
// which makes it slow, failing, hanging or unreachable as the faults say)
// and prints it as an ExecCredential.
package plugin

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"

	"github.com/authvault/authvault/hack/soak/wire"
)

// Main is the plugin's run: its exit status. It prints nothing on stderr
// but why it failed, never a token.
func Main() int {
	if err := run(os.Getenv(wire.PluginURLEnv), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "soak plugin:", err)
		return 1
	}
	return 0
}

// Answer is what the token endpoint answers.
type Answer struct {
	Token   string `json:"token"`
	Expires string `json:"expires,omitempty"` // RFC 3339
}

func run(url string, out io.Writer) error {
	if url == "" {
		return fmt.Errorf("%s is not set", wire.PluginURLEnv)
	}
	// No timeout of its own: a hanging endpoint is a hanging plugin, which
	// is the fault the soak wants its callers to live through.
	resp, err := http.Get(url)
	if err != nil {
		return fmt.Errorf("token endpoint: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("token endpoint: %s", resp.Status)
	}
	var a Answer
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<16)).Decode(&a); err != nil || a.Token == "" {
		return fmt.Errorf("token endpoint: no token in its answer")
	}
	status := map[string]string{"token": a.Token}
	if a.Expires != "" {
		status["expirationTimestamp"] = a.Expires
	}
	return json.NewEncoder(out).Encode(map[string]any{
		"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential", "status": status,
	})
}
