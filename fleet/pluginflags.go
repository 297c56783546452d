package fleet

// What this package knows of the command lines of the plugins the native
// cloud logins serve, so that a profile's arguments are compared with the
// provider's as the plugin reads them: by what a flag sets, under every
// name and in every spelling its parser takes. The flag sets are those of
// aws-iam-authenticator v0.6.13, kubelogin v0.2.21 and v0.2.22 and
// argocd-k8s-auth (Argo CD v3) from their source; of the aws CLI's
// `eks get-token` and global options, and gke-gcloud-auth-plugin's, from
// their source and reference pages.

import (
	"fmt"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// A grammar is the way a plugin's parser reads its flags.
type grammar int

const (
	// pflagGrammar is spf13/pflag's, which cobra commands use: --name V,
	// --name=V, -x V, -xV, -x=V, and the one-letter flags that take no
	// value combined before one that does (-hx V). A flag that takes a
	// value takes the next argument, whatever it is; "--" ends the flags.
	pflagGrammar grammar = iota
	// argparseGrammar is Python's argparse as the aws CLI uses it:
	// --name V and --name=V, where name may be any prefix of a long name
	// (argparse takes an abbreviation that is one flag's only). A value
	// never starts with "-". The aws CLI parses its line in passes, each
	// with part of the flags, so "--" ends nothing for sure.
	argparseGrammar
)

// knownPlugin is a plugin's command line as this package knows it.
type knownPlugin struct {
	name    string // for errors: "aws eks get-token"
	grammar grammar
	words   []string // the positional words that choose its mode, first of its words
	flags   map[string]flagKind
	// goNames: a long name may be written with one dash (Go's flag
	// package, which older releases parsed with).
	goNames bool
	// env are the variables the plugin reads for a flag, by name: the
	// flag's first name.
	env map[string]string
	// envSwitches are flags that change which variables it reads: a
	// profile may not set them when the provider's variables set a flag.
	envSwitches []string
}

// flagKind is what one of a plugin's flag names sets.
type flagKind struct {
	sets    string // the flag's first name: its other names set the same
	noValue bool   // it takes no value unless given with "=" (a boolean)
}

// plugin makes a knownPlugin. Each of flags is the names of one flag,
// separated by spaces, its first name first; a "!" before them marks a
// flag that takes no value.
func plugin(name string, g grammar, words []string, flags ...string) *knownPlugin {
	k := &knownPlugin{name: name, grammar: g, words: words, flags: map[string]flagKind{}}
	for _, f := range flags {
		f, noValue := strings.CutPrefix(f, "!")
		names := strings.Fields(f)
		for _, n := range names {
			k.flags[n] = flagKind{sets: names[0], noValue: noValue}
		}
	}
	return k
}

// klogFlags are klog's, which a plugin that calls klog.InitFlags adds.
var klogFlags = []string{"--v -v", "--vmodule", "--log_dir", "--log_file", "--log_file_max_size", "!--logtostderr",
	"!--alsologtostderr", "--alsologtostderrthreshold", "--stderrthreshold", "!--legacy_stderr_threshold_behavior",
	"!--add_dir_header", "!--skip_headers", "!--skip_log_headers", "!--one_output", "--log_backtrace_at"}

// withEnv is k that reads, for the flag named first in each of vars, the
// variables named after it.
func (k *knownPlugin) withEnv(vars ...string) *knownPlugin {
	k.env = map[string]string{}
	for _, v := range vars {
		names := strings.Fields(v)
		for _, n := range names[1:] {
			k.env[n] = k.flag(names[0])
		}
	}
	return k
}

// withEnvSwitches is k whose flags named change which variables it reads.
func (k *knownPlugin) withEnvSwitches(names ...string) *knownPlugin {
	for _, n := range names {
		k.envSwitches = append(k.envSwitches, k.flag(n))
	}
	return k
}

// withGoNames is k whose long names may be written with one dash.
func (k *knownPlugin) withGoNames() *knownPlugin {
	k.goNames = true
	return k
}

// flag is the first name of k's flag name: a name the tables below give
// that is not one of k's flags is a mistake in them.
func (k *knownPlugin) flag(name string) string {
	f, ok := k.flags[name]
	if !ok {
		panic("fleet: " + k.name + " has no flag " + name)
	}
	return f.sets
}

// knownPlugins are the plugins this package knows, by command name.
var knownPlugins = map[string]*knownPlugin{
	"aws-iam-authenticator": plugin("aws-iam-authenticator token", pflagGrammar, []string{"token"},
		// The root command's flags, then token's.
		"--config -c", "--log-format -l", "--cluster-id -i", "--feature-gates", "!--help -h",
		"--role -r", "--region", "--external-id -e", "--session-name -s", "!--token-only", "!--forward-session-name", "!--cache").
		withEnv("--role DEFAULT_ROLE", "--cluster-id KUBERNETES_AWS_AUTHENTICATOR_CLUSTER_ID", "--region AWS_REGION AWS_DEFAULT_REGION"),
	"aws": plugin("aws eks get-token", argparseGrammar, []string{"eks", "get-token"},
		// The global options (v1 and v2), then get-token's: --cluster-id
		// names the cluster as --cluster-name does.
		"!--debug", "--endpoint-url", "!--no-verify-ssl", "!--no-paginate", "--output", "--query", "--profile", "--region",
		"!--version", "--color", "!--no-sign-request", "--ca-bundle", "--cli-read-timeout", "--cli-connect-timeout",
		"--cli-binary-format", "!--no-cli-pager", "!--cli-auto-prompt", "!--no-cli-auto-prompt", "!--v2-debug",
		"--cluster-name --cluster-id", "--role-arn", "--session-name").
		withEnv("--region AWS_REGION AWS_DEFAULT_REGION", "--profile AWS_PROFILE AWS_DEFAULT_PROFILE", "--output AWS_DEFAULT_OUTPUT",
			"--ca-bundle AWS_CA_BUNDLE", "--endpoint-url AWS_ENDPOINT_URL AWS_ENDPOINT_URL_STS"),
	"argocd-k8s-auth": plugin("argocd-k8s-auth aws", pflagGrammar, []string{"aws"},
		"--cluster-name", "--role-arn", "--profile", "!--help -h").
		withEnv("--profile AWS_PROFILE AWS_DEFAULT_PROFILE"),
	"gke-gcloud-auth-plugin": plugin("gke-gcloud-auth-plugin", pflagGrammar, nil, append([]string{
		"!--use_application_default_credentials", "!--use_edge_cloud", "--project", "--account", "--location",
		"--cluster", "--impersonate_service_account", "!--version", "!--help -h"}, klogFlags...)...).
		withGoNames(),
	"kubelogin": plugin("kubelogin get-token", pflagGrammar, []string{"get-token"},
		"--login -l", "--server-id", "--client-id", "--client-secret", "--client-certificate", "--client-certificate-password",
		"--username", "--password", "--identity-resource-id", "--federated-token-file", "--authority-host",
		"--azure-pipelines-service-connection-id", "--token-cache-dir --cache-dir", "--tenant-id -t", "--subscription -s",
		"--environment -e", "!--legacy", "!--use-azurerm-env-vars", "!--pop-enabled", "--pop-claims", "--timeout",
		"!--disable-environment-override", "!--disable-instance-discovery", "--redirect-url", "--login-hint",
		// The root command's, from Go's flag set (klog's), and cobra's.
		"--v -v", "!--logtostderr", "!--help -h").
		// Its variables win over its flags, unless
		// --disable-environment-override; --use-azurerm-env-vars reads
		// Terraform's (ARM_*) in place of others.
		withEnv("--login AAD_LOGIN_METHOD",
			"--client-id AAD_SERVICE_PRINCIPAL_CLIENT_ID AZURE_CLIENT_ID ARM_CLIENT_ID AZURESUBSCRIPTION_CLIENT_ID",
			"--client-secret AAD_SERVICE_PRINCIPAL_CLIENT_SECRET AZURE_CLIENT_SECRET ARM_CLIENT_SECRET",
			"--client-certificate AAD_SERVICE_PRINCIPAL_CLIENT_CERTIFICATE AZURE_CLIENT_CERTIFICATE_PATH ARM_CLIENT_CERTIFICATE_PATH",
			"--client-certificate-password AAD_SERVICE_PRINCIPAL_CLIENT_CERTIFICATE_PASSWORD AZURE_CLIENT_CERTIFICATE_PASSWORD ARM_CLIENT_CERTIFICATE_PASSWORD",
			"--tenant-id AZURE_TENANT_ID ARM_TENANT_ID AZURESUBSCRIPTION_TENANT_ID",
			"--federated-token-file AZURE_FEDERATED_TOKEN_FILE", "--authority-host AZURE_AUTHORITY_HOST",
			"--username AAD_USER_PRINCIPAL_NAME AZURE_USERNAME", "--password AAD_USER_PRINCIPAL_PASSWORD AZURE_PASSWORD",
			"--timeout AZURE_CLI_TIMEOUT", "--azure-pipelines-service-connection-id AZURESUBSCRIPTION_SERVICE_CONNECTION_ID",
			"--token-cache-dir KUBECACHEDIR").
		withEnvSwitches("--disable-environment-override", "--use-azurerm-env-vars"),
}

// knownNames lists the plugins of knownPlugins, for errors.
var knownNames = func() string {
	var names []string
	for _, k := range knownPlugins {
		names = append(names, k.name)
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}()

// occurrence is one flag a command line gives a value: what it sets, and
// where its name and its value are among the arguments.
type occurrence struct {
	sets  []string // the flags it may be: more than one for an abbreviation; none for a name the plugin does not have
	shown string   // its name as written, for an error, when sets is empty
	at    int      // the argument that names it
	value int      // the argument that holds its value (at when it is the same one, or the flag takes none)
}

// parse reads args as k's parser does, and returns its positional words
// up to a "--" that ends the flags, and the flags it gives values. A flag
// k does not know is an occurrence that sets nothing: the plugin fails on
// it, or a later release of it takes it as a new name of one it knows.
func (k *knownPlugin) parse(args []string) (words []string, occs []occurrence) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case len(a) < 2 || a[0] != '-', k.grammar == argparseGrammar && negativeNumber.MatchString(a):
			words = append(words, a)
		case k.grammar == argparseGrammar && a == "--":
			// Not an end: a later pass may not see it.
		case k.grammar == argparseGrammar:
			var o occurrence
			o, i = k.argparseFlag(args, i)
			occs = append(occs, o)
		case a == "--":
			return words, occs
		case a[1] == '-':
			var o occurrence
			o, i = k.long(args, i, a[2:])
			occs = append(occs, o)
		default:
			if name, _, _ := strings.Cut(a[1:], "="); k.goNames && len(name) > 1 && k.flags["--"+name].sets != "" {
				var o occurrence
				o, i = k.long(args, i, a[1:])
				occs = append(occs, o)
				continue
			}
			var more []occurrence
			more, i = k.shorthands(args, i)
			occs = append(occs, more...)
		}
	}
	return words, occs
}

// long reads the flag args[i], spelled arg without its dashes, as pflag
// does: its value after "=", or none, or the next argument.
func (k *knownPlugin) long(args []string, i int, arg string) (occurrence, int) {
	name, _, inline := strings.Cut(arg, "=")
	f, ok := k.flags["--"+name]
	if !ok {
		return occurrence{shown: "--" + name, at: i, value: i}, i
	}
	o := occurrence{sets: []string{f.sets}, at: i, value: i}
	if !inline && !f.noValue && i+1 < len(args) {
		o.value = i + 1
		return o, i + 1
	}
	return o, i
}

// shorthands reads args[i], one or more one-letter flags, as pflag does:
// each takes the rest of the argument (after an "=" or not), or none, or
// the next argument. It stops at a letter k does not know, where pflag
// fails.
func (k *knownPlugin) shorthands(args []string, i int) ([]occurrence, int) {
	var occs []occurrence
	at := i
	for s := args[at][1:]; s != ""; {
		f, ok := k.flags["-"+s[:1]]
		if !ok {
			return append(occs, occurrence{shown: "-" + s[:1], at: at, value: at}), i
		}
		o := occurrence{sets: []string{f.sets}, at: at, value: at}
		switch {
		case len(s) > 2 && s[1] == '=', !f.noValue && len(s) > 1:
			s = ""
		case f.noValue:
			s = s[1:]
		default:
			s = ""
			if i+1 < len(args) {
				i++
				o.value = i
			}
		}
		occs = append(occs, o)
	}
	return occs, i
}

// negativeNumber is what argparse takes for a value, not a flag, though it
// starts with "-".
var negativeNumber = regexp.MustCompile(`^-\d+$|^-\d*\.\d+$`)

// argparseFlag reads the flag args[i] as argparse does: an exact name, or
// else every flag it is a prefix of; its value after "=" or in the next
// argument, unless that starts with "-".
func (k *knownPlugin) argparseFlag(args []string, i int) (occurrence, int) {
	name, _, inline := strings.Cut(args[i], "=")
	o := occurrence{at: i, value: i}
	takes := false
	if f, ok := k.flags[name]; ok {
		o.sets, takes = []string{f.sets}, !f.noValue
	} else if len(name) > 2 && strings.HasPrefix(name, "--") {
		for _, n := range slices.Sorted(maps.Keys(k.flags)) {
			if f := k.flags[n]; strings.HasPrefix(n, name) && !slices.Contains(o.sets, f.sets) {
				o.sets, takes = append(o.sets, f.sets), takes || !f.noValue
			}
		}
	}
	if len(o.sets) == 0 {
		o.shown = name
		if !strings.HasPrefix(name, "--") {
			o.shown = args[i][:2] // -x…: argparse has no flag of one dash here
		}
		return o, i
	}
	if next := i + 1; !inline && takes && next < len(args) && (!strings.HasPrefix(args[next], "-") || negativeNumber.MatchString(args[next])) {
		o.value = next
		return o, next
	}
	return o, i
}

// maxShownFlag bounds what an error quotes of a profile's flag.
const maxShownFlag = 64

// overridden returns an error when a profile may give a flag that the
// provider's own arguments or variables set (own's) a value of its own:
// by extra, its arguments appended to own's, since a plugin takes the last
// value of a repeated flag; or by a variable of env (own's, with the
// profile's merged in) that the plugin reads in place of that flag. The
// arguments are read as the plugin's parser reads them, when it is one
// this package knows; for another plugin, any flag of extra may be
// another name of one of own's, or stand for one of own's variables, so
// extra may hold no flag when own has a flag or a variable, and the
// variables are not compared. A variable the provider sets itself
// and the profile replaces (ProfileSourcedEnvVarsPolicy Replace) is the
// provider's to give. The error names the flag or the variable, never a
// value of the profile's.
func overridden(own clientcmdapi.ExecConfig, extra []string, env []clientcmdapi.ExecEnvVar) error {
	k, occs := knownParse(own.Command, own.Args, extra)
	if k == nil {
		// A plugin reads a flag over the variable that stands for it (as
		// aws-iam-authenticator reads --role over DEFAULT_ROLE): the
		// provider's variables fix as its flags do.
		by := "arguments"
		if !slices.ContainsFunc(own.Args, isFlag) {
			if len(own.Env) == 0 {
				return nil
			}
			by = "environment variables"
		}
		if i := slices.IndexFunc(extra, isFlag); i >= 0 {
			return fmt.Errorf("extension %s sets a flag (its argument %d), and %s with the provider's arguments is not a command line "+
				"whose flags this package knows (%s): any flag may be another name of one the provider's own %s set",
				ExtraArgsExtension, i+1, filepath.Base(own.Command), knownNames, by)
		}
		return nil
	}
	// fixed has what own sets: flags, and what sets each (a flag, or the
	// variables that stand for it).
	fixed := map[string][]string{}
	for _, o := range occs {
		if o.at < len(own.Args) {
			for _, s := range o.sets {
				fixed[s] = append(fixed[s], s)
			}
		}
	}
	byEnv := false
	for _, e := range own.Env {
		if s, ok := k.env[e.Name]; ok {
			fixed[s], byEnv = append(fixed[s], e.Name), true
		}
	}
	if byEnv {
		for _, s := range k.envSwitches {
			fixed[s] = append(fixed[s], s)
		}
	}
	if len(fixed) == 0 {
		return nil
	}
	for _, o := range occs {
		if o.value < len(own.Args) {
			continue
		}
		if len(o.sets) == 0 {
			return fmt.Errorf("extension %s sets %q, which is not a flag of %s that this package knows: it may be another name of one the provider's own arguments set",
				ExtraArgsExtension, shownFlag(o.shown), k.name)
		}
		for _, s := range o.sets {
			if by := fixed[s]; by != nil {
				if what(by) == "arguments" {
					return fmt.Errorf("extension %s sets %q, which the provider's own arguments set (%s reads the last)", ExtraArgsExtension, s, k.name)
				}
				return fmt.Errorf("extension %s sets %q, which the provider's own environment variables set (%s reads %s for it)",
					ExtraArgsExtension, s, k.name, strings.Join(by, ", "))
			}
		}
	}
	for _, name := range changedEnv(own.Env, env) {
		s, ok := k.env[name]
		if by := fixed[s]; ok && by != nil && !slices.Equal(by, []string{name}) {
			return fmt.Errorf("extension %s sets %s, which %s reads for %s: the provider's own %s set it", ExtraEnvExtension, name, k.name, s, what(by))
		}
	}
	return nil
}

// what says what of a provider's sets a flag: by, its flags' names and
// variables'.
func what(by []string) string {
	if slices.ContainsFunc(by, func(s string) bool { return strings.HasPrefix(s, "-") }) {
		return "arguments"
	}
	return "environment variables"
}

// changedEnv are the names of the variables of env whose value is not
// own's: those a profile added or replaced.
func changedEnv(own, env []clientcmdapi.ExecEnvVar) []string {
	var names []string
	for _, e := range env {
		i := slices.IndexFunc(own, func(o clientcmdapi.ExecEnvVar) bool { return o.Name == e.Name })
		if i < 0 || own[i].Value != e.Value {
			names = append(names, e.Name)
		}
	}
	return names
}

// knownParse is command's plugin, when this package knows it and own and
// extra are a command line of the mode it knows, and the flags they give
// values; nil when not, or when own holds a flag it does not know (a
// later release's, which may be another name of any).
func knownParse(command string, own, extra []string) (*knownPlugin, []occurrence) {
	k, ok := knownPlugins[filepath.Base(command)]
	if !ok {
		return nil, nil
	}
	words, occs := k.parse(slices.Concat(own, extra))
	if len(words) < len(k.words) || !slices.Equal(words[:len(k.words)], k.words) {
		return nil, nil
	}
	for _, o := range occs {
		if o.at < len(own) && len(o.sets) == 0 {
			return nil, nil
		}
	}
	return k, occs
}

// isFlag tells whether arg may be a flag to a parser this package does not
// know.
func isFlag(arg string) bool { return len(arg) > 1 && arg[0] == '-' }

// shownFlag is name, bounded, as an error may quote it.
func shownFlag(name string) string {
	if len(name) > maxShownFlag {
		name = strings.ToValidUTF8(name[:maxShownFlag], "") + "…"
	}
	return name
}
