// Command federation reaches a member cluster with no stored credential:
// the hub (its kubeconfig: --kubeconfig, or the in-cluster ServiceAccount)
// mints a token for its ServiceAccount --serviceaccount in --namespace for
// the member's --audience, and the member's API server, which trusts the
// hub's ServiceAccount issuer, takes it. It lists the member's namespaces
// every --every until interrupted (or once, with --once).
//
// On make cluster-pair, which starts a hub and a member that trusts it:
//
//	go run ./examples/federation --kubeconfig bin/cluster/kubeconfig \
//	    --member-server "$(cat bin/cluster/member-server)" --member-ca bin/cluster/member-ca.crt
//
// docs/federation.md is the guide: the member's AuthenticationConfiguration
// and the RBAC on both sides.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/authvault/authvault/federation"
	"github.com/authvault/authvault/fleet"
	"github.com/authvault/authvault/vault"
)

func main() {
	if flag.Lookup("kubeconfig") == nil {
		flag.String("kubeconfig", "", "the hub's kubeconfig")
	}
	var o options
	flag.StringVar(&o.server, "member-server", "", "the member's API server (https URL)")
	flag.StringVar(&o.ca, "member-ca", "", "a file holding the member's CA (PEM)")
	flag.StringVar(&o.namespace, "namespace", "fleet-system", "the namespace of the hub's ServiceAccount")
	flag.StringVar(&o.serviceAccount, "serviceaccount", "fleet-operator", "the hub's ServiceAccount the member trusts")
	flag.StringVar(&o.audience, "audience", "member-1", "the member's audience")
	flag.DurationVar(&o.every, "every", 10*time.Second, "how often to list the member's namespaces")
	flag.BoolVar(&o.once, "once", false, "list once and stop")
	logOpts := zap.Options{}
	logOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&logOpts)))
	if err := run(ctrl.SetupSignalHandler(), o); err != nil {
		ctrl.Log.WithName("federation-example").Error(err, "stopped")
		os.Exit(1)
	}
}

type options struct {
	server, ca, namespace, serviceAccount, audience string
	every                                           time.Duration
	once                                            bool
}

func run(ctx context.Context, o options) error {
	if o.server == "" || o.ca == "" {
		return errors.New("--member-server and --member-ca are required")
	}
	ca, err := os.ReadFile(o.ca)
	if err != nil {
		return fmt.Errorf("--member-ca: %w", err)
	}
	// The hub's own credentials, in a vault of their own.
	hubVault := vault.New(vault.Options{Logger: ctrl.Log.WithName("hub")})
	defer hubVault.Close()
	hub, err := hubVault.RESTConfig(ctx)
	if err != nil {
		return fmt.Errorf("no credential for the hub: %w", err)
	}

	// The member: an address, a CA and the identity to mint. Nothing
	// stored; the member's vault mints again before each token expires.
	f := fleet.New(fleet.Options{Logger: ctrl.Log.WithName("fleet")})
	defer f.Close()
	err = f.Add("member-1", federation.Login(federation.Config{
		Hub:       hub,
		Namespace: o.namespace, ServiceAccount: o.serviceAccount,
		Audiences: []string{o.audience},
		Member:    federation.Member{Server: o.server, CAData: ca},
	}))
	if err != nil {
		return err
	}
	cfg, err := f.RESTConfig(ctx, "member-1")
	if err != nil {
		return err
	}
	member, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	for {
		list, err := member.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		if err != nil {
			return fmt.Errorf("listing the member's namespaces: %w", err)
		}
		names := make([]string, 0, len(list.Items))
		for _, ns := range list.Items {
			names = append(names, ns.Name)
		}
		fmt.Printf("the member's namespaces, as %s/%s of the hub: %v\n", o.namespace, o.serviceAccount, names)
		if o.once {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(o.every):
		}
	}
}
