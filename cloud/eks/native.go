package eks

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/authvault/authvault/handlers"
	"github.com/authvault/authvault/login"
)

// Native is the EKS login for handlers.UseNative: kubeconfigs whose exec
// plugin makes EKS tokens log in with Login instead, with the plugin's
// parameters. It serves
//
//	aws [--region R] [--profile P] eks get-token --cluster-name C [--role-arn A] [--output json]
//	aws-iam-authenticator token -i C [-r A] [--region R]
//	argocd-k8s-auth aws --cluster-name C [--role-arn A] [--profile P]
//
// (flags as `--flag value` or `--flag=value`), and of the plugin's
// environment AWS_PROFILE, AWS_REGION, AWS_DEFAULT_REGION and
// AWS_STS_REGIONAL_ENDPOINTS=regional. A flag or a variable given twice
// counts at its last value, as the plugin takes it, and AWS_REGION wins
// over AWS_DEFAULT_REGION. Without a region there, the region
// is the one in the server's name when it is an EKS endpoint
// (<id>.gr7.<region>.eks.amazonaws.com), else this process's. Any other
// argument or variable is an error: a parameter is never ignored.
// Credentials are this process's
// (the SDK's default chain, in the named profile), loaded once per region
// and profile and shared by the logins of every cluster there: one web
// identity exchange serves a fleet, not one per cluster.
//
// From a kubeconfig someone else wrote (a Secret whose policy allows it:
// handlers.AllowNative(policy, "eks")), every login first asks
// DescribeCluster whether the kubeconfig's server is the cluster's
// endpoint (Options.CheckServer), and sends no token otherwise; the CA is
// then the cluster's, not the kubeconfig's. Such a kubeconfig may not name
// a profile: which of this machine's identities logs in is not its
// writer's choice. It does choose the cluster, the region and the role
// (--role-arn, -r, Argo CD's roleARN): this process assumes any role its
// identity may assume, and logs in to that role's cluster of that name,
// so allow it only for Secrets whose writers may act as each such role, or
// let the identity assume no other, or name the roles it may
// (NativeWith). Under AllowAll a Secret is trusted as a file is: no check,
// its profile and its CA.
func Native() handlers.Native { return NativeWith(NativeOptions{}) }

// NativeOptions refine Native.
type NativeOptions struct {
	// Roles, when set, tells whether a kubeconfig someone else wrote may
	// have this process assume roleARN (--role-arn, -r, Argo CD's
	// roleARN) to log in: a role it refuses is a permanent error, and
	// nothing is asked of AWS. A kubeconfig of this machine's is not
	// asked about. Default: every role this process's identity may
	// assume, as Argo CD's argocd-k8s-auth does.
	Roles func(roleARN string) bool
}

// NativeWith is Native with opts.
func NativeWith(opts NativeOptions) handlers.Native {
	// A handler per login (the vault asks for one each time) is cheap; the
	// SDK's configuration, with its credential cache and HTTP client, is
	// what the logins of every cluster share.
	shared := &sharedConfigs{}
	return handlers.Native{
		Name:   "eks",
		Serves: serves,
		Handler: func(req handlers.NativeRequest) (login.Handler, error) {
			call, err := nativeOptions(req)
			if err != nil {
				return nil, err
			}
			if req.Untrusted && call.RoleARN != "" && opts.Roles != nil && !opts.Roles(call.RoleARN) {
				return nil, fmt.Errorf("eks: cluster %q: role %q is not one a kubeconfig from elsewhere may have this process assume (eks.NativeOptions.Roles)",
					call.Cluster, call.RoleARN)
			}
			return call.login(shared), nil
		},
	}
}

// serves tells whether exec is one of the plugins Native serves: the
// command's name and its mode, whatever its flags.
func serves(exec clientcmdapi.ExecConfig) bool {
	args := exec.Args
	switch filepath.Base(exec.Command) {
	case "aws":
		i := slices.Index(args, "eks")
		return i >= 0 && slices.Contains(args[i+1:], "get-token")
	case "aws-iam-authenticator":
		return slices.Contains(args, "token")
	case "argocd-k8s-auth":
		return len(args) > 0 && args[0] == "aws"
	}
	return false
}

// nativeCall is what a plugin's parameters ask for.
type nativeCall struct {
	Options
	profile string
}

// plugin describes each plugin Native serves: its positional words, and
// which of its flags set which option.
type plugin struct {
	words []string
	flags map[string]func(*nativeCall, string)
}

var (
	setCluster = func(c *nativeCall, v string) { c.Cluster = v }
	setRole    = func(c *nativeCall, v string) { c.RoleARN = v }
	setRegion  = func(c *nativeCall, v string) { c.Region = v }
	setProfile = func(c *nativeCall, v string) { c.profile = v }
	setOutput  = func(c *nativeCall, v string) {} // checked in parse: json only

	plugins = map[string]plugin{
		"aws": {words: []string{"eks", "get-token"}, flags: map[string]func(*nativeCall, string){
			"--cluster-name": setCluster, "--role-arn": setRole, "--region": setRegion,
			"--profile": setProfile, "--output": setOutput,
		}},
		"aws-iam-authenticator": {words: []string{"token"}, flags: map[string]func(*nativeCall, string){
			"-i": setCluster, "--cluster-id": setCluster, "-r": setRole, "--role": setRole, "--region": setRegion,
		}},
		"argocd-k8s-auth": {words: []string{"aws"}, flags: map[string]func(*nativeCall, string){
			"--cluster-name": setCluster, "--role-arn": setRole, "--profile": setProfile,
		}},
	}
)

// outputFormats are the aws CLI's: an --output an error may quote.
var outputFormats = []string{"json", "yaml", "yaml-stream", "text", "table"}

// nativeOptions are the Options req's plugin asks for.
func nativeOptions(req handlers.NativeRequest) (nativeCall, error) {
	command := filepath.Base(req.Exec.Command)
	p, ok := plugins[command]
	if !ok {
		return nativeCall{}, fmt.Errorf("eks: %q is not a plugin this login serves", command)
	}
	var c nativeCall
	var words []string
	var places []int // of words in args, from 1, for errors
	args := req.Exec.Args
	for i := 0; i < len(args); i++ {
		arg := args[i]
		if !strings.HasPrefix(arg, "-") {
			words, places = append(words, arg), append(places, i+1)
			continue
		}
		name, value, inline := strings.Cut(arg, "=")
		set, ok := p.flags[name]
		if !ok {
			return nativeCall{}, fmt.Errorf("eks: %s: argument %q is not one this login understands", command, name)
		}
		if !inline {
			// A value that starts with a dash is the next flag, the
			// value missing (no cluster, role, region or profile name
			// starts with one): taken as the value, it would be quoted
			// in errors, and it may hold a secret.
			if i+1 >= len(args) || strings.HasPrefix(args[i+1], "-") {
				return nativeCall{}, fmt.Errorf("eks: %s: argument %q has no value", command, name)
			}
			i++
			value = args[i]
		}
		if name == "--output" && value != "json" {
			if slices.Contains(outputFormats, value) {
				return nativeCall{}, fmt.Errorf("eks: %s: --output %q: only json is what a kubeconfig reads", command, value)
			}
			return nativeCall{}, fmt.Errorf("eks: %s: --output: only json is what a kubeconfig reads", command)
		}
		set(&c, value)
	}
	if err := sameWords(command, words, places, p.words); err != nil {
		return nativeCall{}, err
	}
	// A variable set twice has its last value, as in the plugin's
	// process; AWS_REGION wins over AWS_DEFAULT_REGION, as the SDKs and
	// the aws CLI v2 read them.
	last := map[string]string{}
	for _, env := range req.Exec.Env {
		switch {
		case env.Name == "AWS_PROFILE" || env.Name == "AWS_REGION" || env.Name == "AWS_DEFAULT_REGION",
			env.Name == "AWS_STS_REGIONAL_ENDPOINTS" && env.Value == "regional":
			last[env.Name] = env.Value
		default:
			return nativeCall{}, fmt.Errorf("eks: %s: environment variable %s is not one this login understands", command, env.Name)
		}
	}
	c.profile = cmpOr(c.profile, last["AWS_PROFILE"])
	c.Region = cmpOr(c.Region, cmpOr(last["AWS_REGION"], last["AWS_DEFAULT_REGION"]))
	if c.Cluster == "" {
		return nativeCall{}, fmt.Errorf("eks: %s: no cluster name", command)
	}
	c.Server, c.CAData = req.Cluster.Server, req.Cluster.CAData
	if c.Region == "" {
		// Argo CD's awsAuthConfig names no region, and a hub's clusters
		// are in many: this process's own would have DescribeCluster
		// look for the cluster in the wrong one.
		c.Region = endpointRegion(c.Server)
	}
	if req.Untrusted {
		if c.Server == "" {
			return nativeCall{}, fmt.Errorf("eks: cluster %q: a kubeconfig from elsewhere without a server", c.Cluster)
		}
		if c.profile != "" {
			// Which of this machine's identities to use (and a profile's
			// credential_process, which runs a command) is not the
			// writer's choice.
			return nativeCall{}, fmt.Errorf("eks: cluster %q: a kubeconfig from elsewhere may not name an AWS profile", c.Cluster)
		}
		c.CheckServer, c.CAData = true, nil
	}
	return c, nil
}

// sameWords returns nil when words, the positional arguments (at places in
// the arguments), are want, and otherwise an error that quotes only want:
// an argument of the kubeconfig's may be a secret, and errors reach logs.
func sameWords(command string, words []string, places []int, want []string) error {
	for i, w := range want {
		if i >= len(words) {
			return fmt.Errorf("eks: %s: the arguments lack %q (want %q and its flags)", command, w, strings.Join(want, " "))
		}
		if words[i] != w {
			return fmt.Errorf("eks: %s: argument %d is not %q (want %q and its flags)", command, places[i], w, strings.Join(want, " "))
		}
	}
	if len(words) > len(want) {
		return fmt.Errorf("eks: %s: argument %d is neither a flag this login understands nor part of %q", command, places[len(want)], strings.Join(want, " "))
	}
	return nil
}

// cmpOr is a when set, else b: a flag wins over the environment.
func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// login is Login with c's options, in c's profile when it names one, with
// the SDK configuration of shared.
func (c nativeCall) login(shared *sharedConfigs) login.Handler {
	h := &handler{opts: c.Options, turn: make(chan struct{}, 1), profile: c.profile, shared: shared}
	return h.login
}
