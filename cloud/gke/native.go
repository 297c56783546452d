package gke

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/authvault/authvault/handlers"
	"github.com/authvault/authvault/login"
)

// adcFlag is gke-gcloud-auth-plugin's switch to Application Default
// Credentials; without it, the plugin reads gcloud's own account.
const adcFlag = "--use_application_default_credentials"

// Native is the GKE login for handlers.UseNative: kubeconfigs whose user
// runs `gke-gcloud-auth-plugin --use_application_default_credentials` log
// in with Login and Application Default Credentials, as the plugin then
// does (for its scopes, cloud-platform and userinfo.email), with the
// kubeconfig's server and CA. Without that flag the plugin
// reads gcloud's own account, which this login does not: such a kubeconfig
// runs the plugin as before. Any other argument, or any environment
// variable, is an error: a parameter is never ignored.
//
// A kubeconfig someone else wrote (a Secret) may not use it, even when its
// policy names it: the plugin names no cluster, so nothing tells whether
// the server the kubeconfig names is the cluster a Google token is meant
// for, and the token would be replayable there.
func Native() handlers.Native {
	var cache sync.Map // server and CA → login.Handler, so a kept token serves the next first login
	return handlers.Native{
		Name: "gke",
		Serves: func(exec clientcmdapi.ExecConfig) bool {
			return filepath.Base(exec.Command) == "gke-gcloud-auth-plugin" && slices.Contains(exec.Args, adcFlag)
		},
		Handler: func(req handlers.NativeRequest) (login.Handler, error) {
			opts, err := nativeOptions(req)
			if err != nil {
				return nil, err
			}
			key := opts.Server + "\x00" + string(opts.CAData)
			if h, ok := cache.Load(key); ok {
				return h.(login.Handler), nil
			}
			h, _ := cache.LoadOrStore(key, Login(opts))
			return h.(login.Handler), nil
		},
	}
}

// nativeOptions are the Options req's plugin asks for.
func nativeOptions(req handlers.NativeRequest) (Options, error) {
	if req.Untrusted {
		return Options{}, errors.New("gke: a kubeconfig from elsewhere may not use the native GKE login: gke-gcloud-auth-plugin names no cluster to check its server against")
	}
	for i, arg := range req.Exec.Args {
		if arg == adcFlag {
			continue
		}
		// A flag by its name only, and a word by its place: a value may
		// be a secret (a token), and errors reach logs.
		if name, _, _ := strings.Cut(arg, "="); strings.HasPrefix(name, "-") {
			return Options{}, fmt.Errorf("gke: gke-gcloud-auth-plugin: argument %q is not one this login understands", name)
		}
		return Options{}, fmt.Errorf("gke: gke-gcloud-auth-plugin: argument %d, not a flag, is not one this login understands", i+1)
	}
	for _, env := range req.Exec.Env {
		return Options{}, fmt.Errorf("gke: gke-gcloud-auth-plugin: environment variable %s is not one this login understands", env.Name)
	}
	opts := Options{Server: req.Cluster.Server, CAData: req.Cluster.CAData}
	if len(opts.CAData) == 0 && req.Cluster.CAPath != "" {
		ca, err := os.ReadFile(req.Cluster.CAPath)
		if err != nil {
			return Options{}, fmt.Errorf("gke: the cluster's CA: %w", err)
		}
		opts.CAData = ca
	}
	return opts, nil
}
