// Command custom-login shows a login handler of one's own: it reads the
// credential from a secret store (here a stand-in, a JSON file that another
// process rewrites), gives up after three retries, and lists namespaces
// through the vault.
//
//	go run ./examples/custom-login --store /path/to/store.json
//
// The store holds {"server": "https://...", "caData": "<PEM>", "token": "..."}.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/go-logr/logr/funcr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/vault"
)

// secretStore is the stand-in: a JSON file.
type secretStore struct{ path string }

// login reads the current credential from the store.
func (s secretStore) login(ctx context.Context) (*login.ConnectionInfo, error) {
	data, err := os.ReadFile(s.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("secret store %s: not there yet", s.path) // retried
	case errors.Is(err, fs.ErrPermission):
		return nil, login.Permanent(fmt.Errorf("secret store %s: %w", s.path, err))
	case err != nil:
		return nil, err
	}
	var entry struct {
		Server string `json:"server"`
		CAData string `json:"caData"`
		Token  string `json:"token"`
	}
	if err := json.Unmarshal(data, &entry); err != nil {
		// Not err's text: it could quote the file, token and all.
		return nil, login.Permanent(fmt.Errorf("secret store %s: not the expected JSON", s.path))
	}
	return &login.ConnectionInfo{Server: entry.Server, CAData: []byte(entry.CAData), Token: entry.Token}, nil
}

func main() {
	store := flag.String("store", "store.json", "the secret store stand-in")
	runFor := flag.Duration("run-for", 10*time.Second, "how long to keep listing namespaces")
	flag.Parse()
	if err := run(*store, *runFor); err != nil {
		fmt.Fprintln(os.Stderr, "custom-login:", err)
		os.Exit(1) // after run's deferred Close
	}
}

func run(store string, runFor time.Duration) error {
	log := funcr.New(func(prefix, args string) { fmt.Fprintln(os.Stderr, prefix, args) }, funcr.Options{Verbosity: 1})
	v := vault.New(vault.Options{Logger: log.WithName("authvault"), NoFallback: true})
	defer v.Close()
	v.OnLogin(secretStore{store}.login, login.ID("secret-store"),
		login.Retries(3), login.Backoff(500*time.Millisecond, 5*time.Second), login.Timeout(10*time.Second))

	ctx, cancel := context.WithTimeout(context.Background(), runFor)
	defer cancel()
	cfg, err := v.RESTConfig(ctx)
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	for ctx.Err() == nil {
		list, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		if err != nil && ctx.Err() == nil {
			return err
		}
		if err == nil {
			fmt.Printf("namespaces: %d\n", len(list.Items))
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
	return nil
}
