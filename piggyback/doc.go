// Package piggyback holds login handlers that reuse what the process already
// has: the pod's ServiceAccount, a kubeconfig, client-go's configuration.
// A vault with no handler of its own uses them without being asked
// ([Defaults]); register one to choose:
//
//	v.OnLogin(piggyback.ServiceAccount) // in a pod
//	v.OnLogin(piggyback.KubeconfigFrom(piggyback.KubeconfigOptions{Path: "/etc/operator/kubeconfig", Context: "prod"}))
//
// The guide docs/vault.md in the repository says which of them serves when
// no handler is registered, and how they rank beside yours.
//
// # Handlers
//
// [ServiceAccount] logs in as the pod's ServiceAccount, as client-go's
// rest.InClusterConfig does, rereading the projected token as the kubelet
// rotates it. [Kubeconfig] and [KubeconfigFrom] log in as a kubeconfig
// context, loaded by clientcmd with kubectl's rules, for every way a
// kubeconfig user authenticates: tokens, token files, basic auth, client
// certificates, exec plugins (through handlers.Exec, so their expiry drives
// the vault's refresh) and auth providers (through client-go's transport).
// [ClientGo] finds a configuration in controller-runtime's order, and
// [handlers.RESTConfig] turns any *rest.Config into a credential.
//
// A user with an exec plugin and also a token, token file, username or
// client certificate and key authenticates with those and never runs the
// plugin, as client-go does. A cluster with insecure-skip-tls-verify and a
// CA, which client-go refuses, is a permanent error naming the entry.
//
// Each returns (nil, nil) when its source is absent, so that several can be
// registered and the vault uses whichever has something.
//
// # Plugin policy
//
// KubeconfigOptions.PluginPolicy governs the kubeconfig's exec plugin
// (handlers.Exec honours it) and, unless it is AllowAll, refuses an auth
// provider: both run what the kubeconfig's author chose. The default is
// client-go's, allow all, right for a kubeconfig the operator's own user
// wrote; one from elsewhere (a Secret) deserves handlers.DenyAll or an
// Allowlist.
//
// # Fallback
//
// [Defaults] are what a vault uses when the operator registers no handler:
//
//	priority 30  the kubeconfig named by --kubeconfig, else $KUBECONFIG
//	priority 20  the in-cluster ServiceAccount
//	priority 10  ~/.kube/config
//
// The vault hands out the highest priority that gave a credential, which is
// controller-runtime's order, and logs which one won. Every attempt of a
// fallback handler is bounded by [FallbackTimeout] (a minute): a hung exec
// plugin fails its attempt, which is then retried with backoff.
//
// # Plain http: a difference from client-go
//
// client-go takes a server without a scheme ("server: 10.0.0.1:6443",
// "host:port") for plain http: clientcmd always, a rest.Config when it has no
// CA, client certificate or Insecure; a rest.Config's token then goes out in
// clear. These handlers never produce a credential for plain http unless the
// server says http:// explicitly: a kubeconfig server without a scheme is a
// permanent error naming the file, the context and the cluster, and a
// rest.Config Host without a scheme that client-go would reach over http is
// a permanent error too. Write https:// (or http://, to mean it).
//
// # Errors
//
// A broken kubeconfig — bad YAML, no current context, a context naming a
// missing cluster or user, a file it names (certificate-authority,
// client-certificate, client-key, tokenFile) that is missing, unreadable, a
// directory or not a regular file, or a certificate or key file that holds no
// PEM — is a permanent error naming the file, the entry and the field, at the
// handler rather than later in the vault; no error quotes a secret. Where
// clientcmd goes on (a context naming a missing user: anonymous; a key file
// holding garbage: a failure at every handshake), the handler refuses at
// once; the tests run every case of clientcmd's table through both.
// Errors client-go and url.Parse make quote a server or proxy-url verbatim:
// every error of this package's handlers has URL user info redacted.
package piggyback
