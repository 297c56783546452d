package aks

// get-token's command line, as pflag reads it for kubelogin v0.2.22.

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// flag is one of get-token's flags: what it sets, in which modes.
type flag struct {
	boolean bool
	modes   []string // nil: every served mode
	set     func(g *getToken, v string) error
}

// unservedFlags make a kubeconfig's plugin one Native does not serve: a
// proof-of-possession token, or the ADAL library's ("legacy") tokens.
var unservedFlags = []string{"--pop-enabled", "--pop-claims", "--legacy"}

// shorthands are get-token's one-letter flags.
var shorthands = map[string]string{"-l": "--login", "-t": "--tenant-id", "-e": "--environment", "-v": "--v"}

func setString(field func(*getToken) *string) func(*getToken, string) error {
	return func(g *getToken, v string) error { *field(g) = v; return nil }
}

// noEffect is a flag that changes nothing of the token: where kubelogin
// caches on disk (this login keeps its token in memory), and klog's.
func noEffect(*getToken, string) error { return nil }

var flags = map[string]flag{
	"--login":                       {set: setString(func(g *getToken) *string { return &g.mode })},
	"--server-id":                   {set: setString(func(g *getToken) *string { return &g.serverID })},
	"--client-id":                   {set: setString(func(g *getToken) *string { return &g.clientID })},
	"--tenant-id":                   {set: setString(func(g *getToken) *string { return &g.tenantID })},
	"--environment":                 {set: setString(func(g *getToken) *string { return &g.environment })},
	"--authority-host":              {set: setString(func(g *getToken) *string { return &g.authorityHost })},
	"--federated-token-file":        {modes: []string{modeWorkloadIdentity}, set: setString(func(g *getToken) *string { return &g.tokenFile })},
	"--identity-resource-id":        {modes: []string{modeMSI}, set: setString(func(g *getToken) *string { return &g.identityResourceID })},
	"--client-secret":               {modes: []string{modeSPN}, set: setString(func(g *getToken) *string { return &g.clientSecret })},
	"--client-certificate":          {modes: []string{modeSPN}, set: setString(func(g *getToken) *string { return &g.clientCert })},
	"--client-certificate-password": {modes: []string{modeSPN}, set: setString(func(g *getToken) *string { return &g.clientCertPassword })},
	"--disable-instance-discovery":  {boolean: true, set: func(g *getToken, v string) error { g.noDiscovery = v == "true"; return nil }},
	"--timeout": {set: func(g *getToken, v string) error {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return errors.New("is not a positive duration")
		}
		g.timeout = d
		return nil
	}},
	// Read by boolFlag, before the environment is.
	"--disable-environment-override": {boolean: true, set: noEffect},
	"--use-azurerm-env-vars":         {boolean: true, set: noEffect},
	"--cache-dir":                    {set: noEffect},
	"--token-cache-dir":              {set: noEffect},
	"--v":                            {set: noEffect},
	"--logtostderr":                  {boolean: true, set: noEffect},
}

// flagValue is `--name "value"` for an error, without the value when it
// starts with a dash: then it is likely the next flag, which pflag takes
// as the value of a flag whose own is missing, and it may hold a secret
// (--client-secret=…).
func flagValue(name, value string) string {
	if strings.HasPrefix(value, "-") {
		return name + ` (its value starts with "-": the next flag, the value missing?)`
	}
	return fmt.Sprintf("%s %q", name, value)
}

// arg is one flag of a command line, its name canonical.
type arg struct{ name, value string }

// parseArgs splits a get-token command line into its positional words and
// its flags, as pflag does: `--flag value`, `--flag=value`, `-l value`,
// `-lvalue`, and booleans alone or as `--flag=true|false`. A flag it does
// not know is kept under its own name, with the value it was given inline.
func parseArgs(args []string) (words []string, out []arg, err error) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			words = append(words, args[i+1:]...)
			break
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			words = append(words, a)
			continue
		}
		name, value, inline := strings.Cut(a, "=")
		if !strings.HasPrefix(name, "--") && len(name) > 2 && !inline {
			name, value, inline = name[:2], name[2:], true // -lmsi
		}
		if long, ok := shorthands[name]; ok {
			name = long
		}
		f, known := flags[name]
		switch {
		case !known || slices.Contains(unservedFlags, name):
		case f.boolean && !inline:
			value = "true"
		case f.boolean && value != "true" && value != "false":
			return nil, nil, fmt.Errorf("argument %s: want true or false", name)
		case !inline:
			if i+1 >= len(args) {
				return nil, nil, fmt.Errorf("argument %s has no value", name)
			}
			i++
			value = args[i]
		}
		out = append(out, arg{name, value})
	}
	return words, out, nil
}
