// Package handlers holds login handlers that fetch credentials: from a
// client-go credential plugin, a token file, a kubeconfig in a Secret or the
// TokenRequest API. It is also where the cloud modules plug in their native
// logins ([UseNative]).
//
// Each function returns a [login.Handler] to register with a vault:
//
//	cluster := login.ConnectionInfo{Server: "https://10.0.0.1:6443", CAPath: "/etc/operator/ca.crt"}
//	v.OnLogin(handlers.TokenFile("/var/run/secrets/tokens/api", cluster))
//	v.OnLogin(handlers.Exec(handlers.ExecConfig{
//		ExecConfig: clientcmdapi.ExecConfig{Command: "my-plugin", APIVersion: "client.authentication.k8s.io/v1"},
//		Cluster:    cluster,
//	}), login.Timeout(time.Minute))
//	v.OnLogin(handlers.KubeconfigSecret(hub.CoreV1(), "capi", "prod-eu-kubeconfig", handlers.ClusterAPIKey))
//
// Each names itself after what it reads ([login.Named]): "exec
// aws-iam-authenticator", "token file /var/run/secrets/tokens/api",
// "kubeconfig Secret capi/prod-kubeconfig"; that is its ID in logs, errors
// and credentials, and the kind alone ("exec", "token file", "kubeconfig
// Secret") its metric label. No name holds a plugin's arguments or
// environment, a token, or a URL's user info. [login.ID] overrides both.
//
// The guide docs/vault.md in the repository shows them registered with a
// vault; docs/cloud.md, the cloud modules' native logins.
//
// # Credential plugins
//
// [Exec] runs a client-go credential plugin (client.authentication.k8s.io v1
// or v1beta1), the programs kubeconfig users name in their exec section. The
// plugin's expirationTimestamp lets the vault rerun it in the background
// before its token expires: once per expiry, never once per request, and no
// caller waits for it. The plugin runs in a process group of its own (on
// unix), which ends when the plugin exits or its login's context ends.
//
// # Parity with client-go
//
// [Exec] behaves as client-go's exec authenticator does, and the tests run
// client-go's own exec-plugin cases through both:
// the same KUBERNETES_EXEC_INFO (every cluster field client-go sends, with
// [ExecConfig].DisableCompression), the same interactive decision and
// errors ("standard input is unavailable: <message>"), field names decoded
// case-sensitively ("Token" is no token), unknown fields ignored, and a
// client certificate and key that are no PEM key pair refused at login.
// It differs on purpose in two ways:
//
//   - JSON only: the plugin's output must be JSON, as the protocol says;
//     client-go's decoder also takes YAML.
//   - kind is required: output without "kind": "ExecCredential" is refused;
//     client-go takes the kind from the object it decodes into.
//
// # Which plugins may run
//
// ExecConfig.PluginPolicy is client-go's own (PluginPolicy here): the zero
// value and AllowAll run any command, as client-go does (KubeconfigSecret's
// zero value is DenyAll instead); DenyAll runs none;
// Allowlist runs only the commands it names, compared as written and after
// both are resolved through $PATH. A policy that refuses the plugin, or is
// malformed (an Allowlist without entries, a policy type client-go does not
// know), is a permanent error naming the command and the policy, and
// nothing of the plugin runs.
//
// An Allowlist says which programs run, not what they do, and an allowed
// plugin is code that whoever wrote its config can steer: its arguments
// and its env are theirs. So under any policy but AllowAll the config's env
// may not set:
//
//   - what loads code or picks programs: the loader's variables (LD_*,
//     GLIBC_TUNABLES, GCONV_PATH and the rest of glibc's list of unsafe
//     ones), the shells' (BASH_FUNC_*, BASH_ENV, ENV, SHELLOPTS, PS4, IFS),
//     the interpreters' (PYTHON*, NODE_*, PERL*, RUBY*, JAVA_TOOL_OPTIONS,
//     DOTNET_*), gcloud's properties (CLOUDSDK_*), PATH and HOME;
//   - the files plugins read commands from (KUBECONFIG, AWS_CONFIG_FILE,
//     GOOGLE_APPLICATION_CREDENTIALS);
//   - what sends this process's own secrets elsewhere: a token file the
//     plugin posts and the endpoint it posts it to
//     (AWS_WEB_IDENTITY_TOKEN_FILE, AWS_ENDPOINT_URL*,
//     AWS_CONTAINER_CREDENTIALS_FULL_URI, AZURE_FEDERATED_TOKEN_FILE,
//     AZURE_AUTHORITY_HOST), trust roots (SSL_CERT_FILE, AWS_CA_BUNDLE…),
//     a plain-http proxy (HTTP_PROXY, ALL_PROXY), which sees the cloud
//     metadata services' answers, and GODEBUG, which can make a Go plugin
//     print the headers it sends;
//   - a name that is not a plain identifier, or a value with a line break
//     or NUL.
//
// Such a config is a permanent error naming the variable, never its value,
// and the plugin does not run (a config that set one ran its plugin before
// this check). The plugin still inherits this process's own environment:
// set what it needs there. What a plugin is commonly given passes
// (AWS_PROFILE, AWS_REGION, AWS_STS_REGIONAL_ENDPOINTS, AWS_ROLE_ARN,
// AZURE_CLIENT_ID, AZURE_TENANT_ID, AAD_LOGIN_METHOD, KUBECACHEDIR,
// HTTPS_PROXY, NO_PROXY).
//
// Allow only plugins whose arguments cannot make them run other code or
// read this process's files. aws, gcloud and kubelogin are not such
// plugins: "aws s3 cp <file> s3://…" uploads any file of this machine,
// gcloud's --access-token-file sends a file's content as the token, and
// kubelogin's --federated-token-file with --authority-host posts a file
// to a host the config names.
//
// # Telling the plugin why it runs
//
// With [ExecConfig].ProvideResponse set, a plugin that the vault runs again
// because the server rejected its credential (login.ReasonFrom gives
// [login.Rejected] with a status code) is told the response: its
// KUBERNETES_EXEC_INFO carries spec.response with the status code and the
// WWW-Authenticate header, and nothing else of the response or the request:
//
//	{"kind":"ExecCredential","apiVersion":"client.authentication.k8s.io/v1",
//	 "spec":{"interactive":false,
//	  "response":{"code":401,"header":{"WWW-Authenticate":["Bearer realm=\"api\""]}}}}
//
// The shape is the ExecInfo response of client-go's original exec plugin
// proposal, which client-go dropped: neither v1 nor v1beta1 defines it, so a
// plugin that decodes strictly would refuse it, and it is off by default. A
// first login, a refresh, an expired credential or a rejection whose response
// is unknown (a caller's Invalidate) send no response.
//
// # Cloud plugins served in process
//
// [UseNative] makes the cloud modules' logins (cloud/eks, cloud/gke) serve
// the plugins they recognize, `aws eks get-token` say, in every kubeconfig
// this process reads and every [Exec]: no process runs. A kubeconfig that
// someone else wrote (a Secret: any policy but AllowAll) may use one only
// when its policy names it ([AllowNative]; a policy that lists the plugin's
// command is not enough, and the plugin does not run in its place); the
// login then checks, where the cloud can, that the kubeconfig's server is
// the cluster's, and the kubeconfig may set neither tls-server-name nor
// proxy-url. A Secret read under AllowAll is trusted as a file is. A
// kubeconfig that only client-go can serve (impersonation, an auth
// provider) has client-go run the plugin, not the native login.
//
// # Files and fixed credentials
//
// [TokenFile] reads a bearer token from a file on every login and asks the
// vault to read the file again every [RereadAfter] (and before a JWT's exp),
// so tokens that the kubelet rotates under a running pod are picked up; a
// token that has not changed is kept. The file must be a
// regular file of at most 1 MiB holding one token; it is never read beyond
// that bound, and a named pipe never blocks a login. [Static] gives a fixed
// credential.
//
// # Kubeconfigs and rest.Configs
//
// [Kubeconfig] logs in as a context of a kubeconfig the operator has already
// loaded (from a secret manager, a custom resource, clientcmd.Load of bytes);
// piggyback.KubeconfigFrom loads files and maps them through it, and so does
// fleet for a ClusterProfile. Without [KubeconfigConfig].LoadingRules the
// kubeconfig is taken for someone else's, as a Secret's below: DenyAll by
// default, and no entry may name a file. [RESTConfig] turns a *rest.Config
// into a credential the same way; what only client-go can do (an auth
// provider, WrapTransport, impersonation) keeps client-go's round tripper.
//
// # Kubeconfigs in Secrets
//
// [KubeconfigSecret] reads a kubeconfig from a Secret of a hub cluster at
// every login (Cluster API's <cluster>-kubeconfig, key "value") and maps it as
// piggyback.KubeconfigFrom maps a file, with clientcmd's semantics: the same
// cases of clientcmd's tests come to the same credential through both. Its
// author is not this process, so two things differ. Its exec plugins and auth
// providers are refused unless [KubeconfigSecretConfig].PluginPolicy allows
// them (default DenyAll; a kubeconfig file's default stays client-go's,
// AllowAll). And an entry that names a file (certificate-authority,
// client-certificate, client-key, tokenFile) is refused: it would name a file
// of this machine, such as the pod's own ServiceAccount token, and send it to a
// server the Secret's author chose. A missing Secret or key, or content that
// does not parse, is a permanent error naming the Secret and the key; parse
// errors that quote the content have it cut out.
//
// # ServiceAccount tokens
//
// [TokenRequest] mints tokens for a ServiceAccount through the TokenRequest
// API, for an operator that acts as its tenants' ServiceAccounts.
//
// # Errors
//
// Every error names its source (the plugin, the file, the ServiceAccount)
// and what was wrong; none quotes a token or a plugin's output. A plugin's
// stderr goes to [ExecConfig].Stderr (default os.Stderr), never into an error
// or a log line: the error says where it went.
package handlers
