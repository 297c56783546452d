package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/kubernetes"

	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/piggyback"
	"github.com/authvault/authvault/testkit/rotation"
	"github.com/authvault/authvault/vault"
)

// realCluster runs the workload through a vault with the kubeconfig's
// credentials, against a cluster of the user's.
func realCluster(ctx context.Context, kubeconfig string, workers int, duration time.Duration) error {
	v := vault.New(vault.Options{NoFallback: true, Logger: logr.Discard()})
	defer v.Close()
	v.OnLogin(piggyback.KubeconfigFrom(piggyback.KubeconfigOptions{Path: kubeconfig}), login.ID("kubeconfig"), login.Timeout(time.Minute))
	cfg, err := v.RESTConfig(ctx)
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ns := v.Namespace()
	fmt.Printf("running %d workers for %v in namespace %s of %s\n", workers, duration, ns, cfg.Host)
	p := newProgress(os.Stdout)
	stats := rotation.Run(ctx, cs, ns, workers, duration, func(requests, unauthorized, other int64) {
		line := fmt.Sprintf("requests %7d  401s seen by callers %4d  other errors %3d", requests, unauthorized, other)
		if p.terminal {
			fmt.Print("\r" + line)
		} else {
			fmt.Println(line)
		}
	})
	if p.terminal {
		fmt.Println()
	}
	fmt.Printf("\n%s", rotation.Table([]rotation.Side{{Name: "authvault", Stats: stats}}))
	if stats.FirstError != nil {
		fmt.Println("first error:", stats.FirstError)
	}
	return nil
}
