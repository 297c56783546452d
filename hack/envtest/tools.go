//go:build tools

// Package envtest pins the commands hack/envtest.sh builds.
package envtest

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
