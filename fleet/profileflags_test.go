package fleet

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// chosen is the value a profile tries to give a flag the provider fixed:
// no error may quote it.
const chosen = "CH0SEN-by-the-profile"

// plugins are the providers of the flag tests: each plugin a native login
// serves, and one whose flags this package does not know, with the
// provider's own arguments and, for each flag they set, every name the
// plugin reads it by (and, for the aws CLI, abbreviations argparse takes).
var flagPlugins = []struct {
	name    string
	command string
	own     []string
	aliases [][]string
	bools   string   // shorthands of the plugin's flags that take no value
	other   []string // a flag the provider does not set
}{
	{"aws-iam-authenticator", "/usr/local/bin/aws-iam-authenticator",
		[]string{"token", "-i", "prod", "-r", "arn:aws:iam::1:role/fixed", "--region", "eu-west-1"},
		[][]string{{"-r", "--role"}, {"-i", "--cluster-id"}, {"--region"}}, "h", []string{"--session-name", "s"}},
	{"aws eks get-token", "aws",
		[]string{"--region", "eu-west-1", "eks", "get-token", "--cluster-name", "prod", "--role-arn", "arn:aws:iam::1:role/fixed"},
		[][]string{{"--role-arn", "--role-a", "--role", "--ro"}, {"--region", "--reg", "--r"}, {"--cluster-name", "--cluster-n", "--cluster-id", "--cluster"}}, "", []string{"--output", "json"}},
	{"argocd-k8s-auth aws", "argocd-k8s-auth",
		[]string{"aws", "--cluster-name", "prod", "--role-arn", "arn:aws:iam::1:role/fixed"},
		[][]string{{"--role-arn"}, {"--cluster-name"}}, "h", []string{"--profile", "ops"}},
	{"gke-gcloud-auth-plugin", "gke-gcloud-auth-plugin",
		[]string{"--use_application_default_credentials", "--impersonate_service_account=ops@p.iam.gserviceaccount.com", "--project", "p"},
		[][]string{{"--use_application_default_credentials", "-use_application_default_credentials"},
			{"--impersonate_service_account", "-impersonate_service_account"}, {"--project", "-project"}}, "h", []string{"--v=1"}},
	{"kubelogin get-token", "kubelogin",
		[]string{"get-token", "--login", "workloadidentity", "--server-id", "S", "--client-id", "C", "-t", "T", "--environment=AzurePublicCloud", "--cache-dir", "/c"},
		[][]string{{"-l", "--login"}, {"--server-id"}, {"--client-id"}, {"-t", "--tenant-id"}, {"-e", "--environment"}, {"--cache-dir", "--token-cache-dir"}}, "h", []string{"-v", "1"}},
	{"an unknown plugin", "vendor-credentials",
		[]string{"get-token", "--role=arn:aws:iam::1:role/fixed", "-c", "prod"},
		[][]string{{"--role", "-role", "--ROLE", "-r", "--role-arn", "--iam-role", "--ro"}, {"-c", "--cluster", "-xc", "--context"}}, "", []string{"more"}},
}

// spellings are the ways a command line may give name the value v: for a
// one-letter flag -x: -x V, -xV, -x=V, and after the plugin's flags that
// take no value (-hx V); for a long one: --x V and --x=V.
func spellings(name, v, bools string) [][]string {
	out := [][]string{{name, v}, {name + "=" + v}}
	if len(name) == 2 && name[0] == '-' {
		out = append(out, []string{name + v})
		for _, b := range bools {
			out = append(out, []string{"-" + string(b) + name[1:], v}, []string{"-" + string(b) + name[1:] + v})
		}
	}
	return out
}

// A profile's arguments may not give a flag the provider's own arguments
// set another value, under any of the plugin's names for it, in any
// spelling its parser takes, once or twice, after other flags: the plugin
// takes the last. For a plugin whose flags are not known, any flag may be
// another name of the provider's: a profile may add none.
func TestProfileArgsCannotSetTheProvidersFlags(t *testing.T) {
	for _, p := range flagPlugins {
		provider := AccessProvider{Name: "p", ProfileSourcedCLIArgsPolicy: ArgsAppend,
			ExecConfig: &clientcmdapi.ExecConfig{Command: p.command, APIVersion: execAPIVersionV1, Args: p.own}}
		for _, names := range p.aliases {
			for _, name := range names {
				for _, spelled := range spellings(name, chosen, p.bools) {
					for _, extra := range [][]string{
						spelled,
						slices.Concat(spelled, spelled),
						slices.Concat(p.other, spelled),
					} {
						checkRefused(t, p.name, provider, extra)
					}
				}
			}
		}
	}
}

// checkRefused fails unless the profile's arguments extra are refused by
// the name of the flag, without the value they give it.
func checkRefused(t *testing.T, plugin string, provider AccessProvider, extra []string) {
	t.Helper()
	a, err := accessFor(argsProfile(extra), []AccessProvider{provider})
	switch {
	case err == nil:
		t.Errorf("%s: profile args %q accepted: the plugin runs %q", plugin, extra, a.exec.Args)
	case !strings.Contains(err.Error(), "provider's own arguments set"):
		t.Errorf("%s: profile args %q: %v, want a refusal saying the provider sets it", plugin, extra, err)
	case strings.Contains(err.Error(), chosen):
		t.Errorf("%s: profile args %q: the error quotes the profile's value: %v", plugin, extra, err)
	}
}

// argsProfile is a profile of provider "p" whose cluster adds args.
func argsProfile(args []string) *unstructured.Unstructured {
	list := make([]any, len(args))
	for i, a := range args {
		list[i] = a
	}
	return profile("ns", "p", "p", map[string]any{"server": "https://a.example", "extensions": []any{
		map[string]any{"name": ExtraArgsExtension, "extension": list},
	}})
}

// What the plugin's parser proves is not a flag the provider sets is
// appended: another flag, a value that looks like a flag where the parser
// takes it for a value, words after pflag's "--"; and anything, when the
// provider's own arguments set no flag.
func TestProfileArgsThatSetOtherFlags(t *testing.T) {
	fixed := func(command string, own ...string) AccessProvider {
		return AccessProvider{Name: "p", ProfileSourcedCLIArgsPolicy: ArgsAppend,
			ExecConfig: &clientcmdapi.ExecConfig{Command: command, APIVersion: execAPIVersionV1, Args: own}}
	}
	iam := fixed("aws-iam-authenticator", "token", "-i", "prod", "-r", "arn:aws:iam::1:role/fixed")
	kubelogin := fixed("kubelogin", "get-token", "-l", "workloadidentity", "--server-id", "S", "--tenant-id", "T")
	for _, tt := range []struct {
		provider AccessProvider
		extra    []string
	}{
		{iam, []string{"--session-name", "s", "--region=eu-west-1", "--forward-session-name"}},
		{iam, []string{"--session-name", "-r"}},                                    // -r is the session's name
		{iam, []string{"-s-r", "-s=-r"}},                                           // so is each -r here
		{iam, []string{"-hs", "-r"}},                                               // help, and the session's name
		{iam, []string{"--", "-r", "arn:aws:iam::1:role/other"}},                   // words after "--"
		{iam, []string{"\u2013r", "arn:aws:iam::1:role/other", "\u2014role", "x"}}, // dashes pflag does not read: words
		{iam, []string{"-sr", "arn:aws:iam::1:role/other"}},                        // -s takes "r", then a word
		{fixed("aws", "eks", "get-token", "--role-arn", "arn:aws:iam::1:role/fixed"), []string{"--cluster-name", "prod", "--reg", "eu-west-1", "--output=json"}},
		{fixed("argocd-k8s-auth", "aws", "--role-arn", "arn:aws:iam::1:role/fixed"), []string{"--cluster-name", "prod"}},
		{fixed("gke-gcloud-auth-plugin", "--use_application_default_credentials"), []string{"--v=4", "-vmodule=x=2"}},
		{kubelogin, []string{"--client-id", "C", "-v", "4", "-v4", "--timeout=30s"}},
		{kubelogin, []string{"-v", "-t"}}, // -t is the verbosity
		{fixed("kubelogin", "get-token"), []string{"--tenant-id", "T", "-lmsi"}},
		{fixed("vendor-credentials", "get-token", "prod"), []string{"--role", "r", "-c"}},
		{fixed("vendor-credentials", "get-token", "--role=r"), []string{"prod", "-"}},
	} {
		a, err := accessFor(argsProfile(tt.extra), []AccessProvider{tt.provider})
		if err != nil {
			t.Errorf("%s %q: %v", tt.provider.ExecConfig.Command, tt.extra, err)
			continue
		}
		if want := slices.Concat(tt.provider.ExecConfig.Args, tt.extra); !slices.Equal(a.exec.Args, want) {
			t.Errorf("%s %q: the plugin runs %q, want %q", tt.provider.ExecConfig.Command, tt.extra, a.exec.Args, want)
		}
	}
}

// A flag the provider names last, without its value, takes the profile's
// first argument as its value: the profile would choose it. A provider
// whose own arguments hold a flag of a known plugin that this package does
// not know (a later release's) is one of a plugin whose flags are not
// known. And "--" ends no flag of the aws CLI.
func TestProfileArgsCompleteTheProvidersFlag(t *testing.T) {
	for _, tt := range []struct {
		command string
		own     []string
		want    string
	}{
		{"aws-iam-authenticator", []string{"token", "-i", "prod", "-r"}, `sets "--role", which the provider's own arguments set`},
		{"kubelogin", []string{"get-token", "--tenant-id"}, `sets "--tenant-id", which the provider's own arguments set`},
		{"kubelogin", []string{"get-token", "--new-in-a-later-release", "x"}, "kubelogin with the provider's arguments is not a command line whose flags this package knows"},
		// The aws CLI parses in passes: "--" ends nothing for sure.
		{"aws", []string{"eks", "get-token", "--role-arn", "arn:aws:iam::1:role/fixed", "--"}, `sets "--role-arn"`},
	} {
		provider := AccessProvider{Name: "p", ProfileSourcedCLIArgsPolicy: ArgsAppend,
			ExecConfig: &clientcmdapi.ExecConfig{Command: tt.command, APIVersion: execAPIVersionV1, Args: tt.own}}
		extra := []string{chosen}
		switch {
		case tt.command == "aws":
			extra = []string{"--role-arn", chosen}
		case strings.Contains(tt.want, "not a command line"):
			extra = []string{"--cluster-name", chosen}
		}
		_, err := accessFor(argsProfile(extra), []AccessProvider{provider})
		if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), chosen) {
			t.Errorf("%s %q + %q: %v, want an error with %q", tt.command, tt.own, extra, err, tt.want)
		}
	}
}

// A variable the plugin reads for a flag is that flag: a profile's
// variable may not set what the provider's arguments or variables set
// (kubelogin reads AZURE_TENANT_ID over its --tenant-id), nor a
// profile's flag what the provider's variables set, nor, when they set
// one, the flags that change which variables kubelogin reads. The
// provider's own variable, replaced under Replace, is the provider's to
// give; a variable no flag stands for, or one of a plugin whose flags are
// not known, is the env policy's alone.
func TestProfileEnvCannotSetTheProvidersFlags(t *testing.T) {
	provider := func(policy, command string, args []string, env ...string) AccessProvider {
		p := AccessProvider{Name: "p", ProfileSourcedCLIArgsPolicy: ArgsAppend, ProfileSourcedEnvVarsPolicy: policy,
			ExecConfig: &clientcmdapi.ExecConfig{Command: command, APIVersion: execAPIVersionV1, Args: args}}
		for i := 0; i+1 < len(env); i += 2 {
			p.ExecConfig.Env = append(p.ExecConfig.Env, clientcmdapi.ExecEnvVar{Name: env[i], Value: env[i+1]})
		}
		return p
	}
	kubeloginArgs := []string{"get-token", "-l", "workloadidentity", "--server-id", "S", "--client-id", "C", "--tenant-id", "T"}
	iamArgs := []string{"token", "-i", "prod", "-r", "arn:aws:iam::1:role/fixed"}
	awsArgs := []string{"eks", "get-token", "--cluster-name", "prod", "--role-arn", "arn:aws:iam::1:role/fixed", "--region", "eu-west-1", "--profile", "prod"}
	for _, tt := range []struct {
		provider AccessProvider
		args     []string
		env      map[string]any
		want     string // in the error; "" for none
	}{
		{provider(EnvAppendIfNotExists, "kubelogin", kubeloginArgs), nil, map[string]any{"AZURE_TENANT_ID": chosen},
			"sets AZURE_TENANT_ID, which kubelogin get-token reads for --tenant-id: the provider's own arguments set it"},
		{provider(EnvAppendIfNotExists, "kubelogin", kubeloginArgs), nil, map[string]any{"ARM_CLIENT_ID": chosen},
			"sets ARM_CLIENT_ID, which kubelogin get-token reads for --client-id"},
		{provider(EnvReplace, "kubelogin", kubeloginArgs), nil, map[string]any{"AAD_LOGIN_METHOD": chosen}, "reads for --login"},
		{provider(EnvAppendIfNotExists, "kubelogin", []string{"get-token"}, "AZURE_CLIENT_ID", "C"), []string{"--client-id", chosen}, nil,
			`sets "--client-id", which the provider's own environment variables set`},
		{provider(EnvAppendIfNotExists, "kubelogin", []string{"get-token"}, "AZURE_CLIENT_ID", "C"), []string{"--disable-environment-override"}, nil,
			`sets "--disable-environment-override"`},
		{provider(EnvAppendIfNotExists, "kubelogin", []string{"get-token"}, "AZURE_CLIENT_ID", "C"), []string{"--use-azurerm-env-vars=true"}, nil,
			`sets "--use-azurerm-env-vars"`},
		{provider(EnvAppendIfNotExists, "kubelogin", []string{"get-token"}, "AZURE_CLIENT_ID", "C"), nil, map[string]any{"AAD_SERVICE_PRINCIPAL_CLIENT_ID": chosen},
			"the provider's own environment variables set it"},
		{provider(EnvAppendIfNotExists, "aws", []string{"eks", "get-token"}, "AWS_REGION", "eu-west-1"), []string{"--cluster-name", "c", "--reg", chosen}, nil,
			`sets "--region", which the provider's own environment variables set`},
		{provider(EnvAppendIfNotExists, "aws-iam-authenticator", []string{"token", "-i", "c"}, "DEFAULT_ROLE", "arn:aws:iam::1:role/fixed"), []string{"-r" + chosen}, nil,
			`sets "--role"`},
		{provider(EnvAppendIfNotExists, "aws-iam-authenticator", []string{"token", "-i", "c", "--region", "eu-west-1"}), nil, map[string]any{"AWS_DEFAULT_REGION": chosen},
			"reads for --region"},
		{provider(EnvReplace, "kubelogin", []string{"get-token", "--tenant-id", "T"}, "AZURE_TENANT_ID", "T"), nil, map[string]any{"AZURE_TENANT_ID": chosen},
			"sets AZURE_TENANT_ID, which kubelogin get-token reads for --tenant-id: the provider's own arguments set it"},
		// A review's attempts: other spellings, names and aliases.
		{provider(EnvAppendIfNotExists, "aws-iam-authenticator", iamArgs), []string{"--role-arn=" + chosen}, nil, `sets "--role-arn", which is not a flag`},
		{provider(EnvAppendIfNotExists, "aws-iam-authenticator", iamArgs), []string{"--ROLE", chosen}, nil, `sets "--ROLE", which is not a flag`},
		{provider(EnvAppendIfNotExists, "aws-iam-authenticator", iamArgs), []string{"--role="}, nil, `sets "--role"`},
		{provider(EnvAppendIfNotExists, "aws-iam-authenticator", iamArgs), []string{"-r="}, nil, `sets "--role"`},
		{provider(EnvAppendIfNotExists, "aws-iam-authenticator", iamArgs), []string{"--session-name", "--", "-r", chosen}, nil, `sets "--role"`}, // "--" is the session's name
		{provider(EnvAppendIfNotExists, "aws-iam-authenticator", iamArgs), []string{"-s", "--", "-r", chosen}, nil, `sets "--role"`},
		{provider(EnvAppendIfNotExists, "aws-iam-authenticator", iamArgs), []string{"---role", chosen}, nil, "which is not a flag"},
		{provider(EnvAppendIfNotExists, "aws-iam-authenticator", iamArgs), nil, map[string]any{"DEFAULT_ROLE": chosen}, "reads for --role"},
		{provider(EnvAppendIfNotExists, "aws", awsArgs), []string{"--rol", chosen}, nil, `sets "--role-arn"`},
		{provider(EnvAppendIfNotExists, "aws", awsArgs), []string{"--role-arn="}, nil, `sets "--role-arn"`},
		{provider(EnvAppendIfNotExists, "aws", awsArgs), []string{"--output", "--role-arn", chosen}, nil, `sets "--role-arn"`},
		{provider(EnvAppendIfNotExists, "aws", awsArgs), []string{"--cli-input-json", "{}"}, nil, "which is not a flag"},
		{provider(EnvAppendIfNotExists, "aws", awsArgs), nil, map[string]any{"AWS_REGION": chosen}, "reads for --region"},
		{provider(EnvAppendIfNotExists, "aws", awsArgs), nil, map[string]any{"AWS_DEFAULT_REGION": chosen}, "reads for --region"},
		{provider(EnvAppendIfNotExists, "aws", awsArgs), nil, map[string]any{"AWS_PROFILE": chosen}, "reads for --profile"},
		{provider(EnvAppendIfNotExists, "aws", awsArgs), nil, map[string]any{"AWS_DEFAULT_PROFILE": chosen}, "reads for --profile"},
		{provider(EnvAppendIfNotExists, "aws", []string{"eks", "get-token", "--cluster-name", "c"}, "AWS_PROFILE", "prod"), []string{"--p", chosen}, nil,
			`sets "--profile", which the provider's own environment variables set`},
		{provider(EnvAppendIfNotExists, "aws", []string{"eks", "get-token", "--cluster-name", "c"}, "AWS_REGION", "eu-west-1"), nil, map[string]any{"AWS_DEFAULT_REGION": chosen},
			"reads for --region: the provider's own environment variables set it"},
		{provider(EnvReplace, "aws", []string{"eks", "get-token", "--cluster-name", "c"}, "AWS_REGION", "eu-west-1", "AWS_DEFAULT_REGION", "eu-west-1"),
			nil, map[string]any{"AWS_REGION": chosen}, "reads for --region"},
		{provider(EnvAppendIfNotExists, "argocd-k8s-auth", []string{"aws", "--cluster-name", "c"}, "AWS_PROFILE", "prod"), []string{"--profile=" + chosen}, nil,
			`sets "--profile", which the provider's own environment variables set`},
		{provider(EnvAppendIfNotExists, "gke-gcloud-auth-plugin", []string{"--use_application_default_credentials", "--project", "p"}), []string{"-project", chosen}, nil, `sets "--project"`},
		{provider(EnvAppendIfNotExists, "gke-gcloud-auth-plugin", []string{"--use_application_default_credentials"}), []string{"-use_application_default_credentials=false"}, nil,
			`sets "--use_application_default_credentials"`},
		{provider(EnvAppendIfNotExists, "kubelogin", kubeloginArgs), []string{"--tenant", chosen}, nil, `sets "--tenant", which is not a flag`},
		{provider(EnvAppendIfNotExists, "kubelogin", kubeloginArgs), []string{"-vt", chosen}, nil, ""}, // -v takes "t"
		// A plugin whose flags are not known reads a flag over its
		// variable, as the ones known do: the provider's variable fixes.
		{provider(EnvAppendIfNotExists, "vendor-credentials", []string{"get-token"}, "VENDOR_ROLE", "fixed"), []string{"--role", chosen}, nil,
			"is not a command line whose flags this package knows"},

		// Taken.
		{provider(EnvReplace, "kubelogin", []string{"get-token"}, "AZURE_TENANT_ID", "T"), nil, map[string]any{"AZURE_TENANT_ID": "T2"}, ""},
		{provider(EnvAppendIfNotExists, "kubelogin", []string{"get-token"}, "AZURE_TENANT_ID", "T"), nil, map[string]any{"AZURE_TENANT_ID": chosen}, ""}, // the provider's wins
		{provider(EnvAppendIfNotExists, "kubelogin", kubeloginArgs), []string{"-v", "4"}, map[string]any{"KUBELOGIN_OTHER": "x"}, ""},
		{provider(EnvAppendIfNotExists, "aws", []string{"eks", "get-token", "--role-arn", "r"}), []string{"--cluster-name", "c"}, map[string]any{"AWS_REGION": "eu-west-1"}, ""},
		{provider(EnvAppendIfNotExists, "vendor-credentials", []string{"--tenant", "T"}), nil, map[string]any{"VENDOR_TENANT": "x"}, ""},
	} {
		list := []any{}
		for _, a := range tt.args {
			list = append(list, a)
		}
		if tt.env == nil {
			tt.env = map[string]any{}
		}
		u := profile("ns", "p", "p", map[string]any{"server": "https://a.example", "extensions": []any{
			map[string]any{"name": ExtraArgsExtension, "extension": list},
			map[string]any{"name": ExtraEnvExtension, "extension": tt.env},
		}})
		_, err := accessFor(u, []AccessProvider{tt.provider})
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s %q, env %v: %v", tt.provider.ExecConfig.Command, tt.args, tt.env, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s %q, env %v: %v, want an error with %q", tt.provider.ExecConfig.Command, tt.args, tt.env, err, tt.want)
		case err != nil && strings.Contains(err.Error(), chosen):
			t.Errorf("the error quotes the profile's value: %v", err)
		}
	}
}
