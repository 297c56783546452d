//go:build tools

// Package peers pins the commands hack/peers.sh builds.
package peers

import (
	_ "github.com/Azure/kubelogin"
	_ "sigs.k8s.io/aws-iam-authenticator/cmd/aws-iam-authenticator"
)
