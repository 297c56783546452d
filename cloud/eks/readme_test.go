package eks_test

import (
	"time"

	"github.com/authvault/authvault/cloud/eks"
	"github.com/authvault/authvault/handlers"
	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/vault"
)

// The EKS section of docs/cloud.md, compiled (it needs a cloud: it does not run).
func Example_readme() {
	v := vault.New(vault.Options{})
	defer v.Close()
	v.OnLogin(eks.Login(eks.Options{
		Cluster: "prod", Region: "eu-west-1", // server and CA: from DescribeCluster
		RoleARN: "arn:aws:iam::111122223333:role/eks-admin", // optional: a role to assume first
	}), login.Timeout(30*time.Second))
	// Kubeconfigs whose user runs `aws eks get-token`, aws-iam-authenticator or argocd-k8s-auth:
	handlers.UseNative(eks.Native())
}
