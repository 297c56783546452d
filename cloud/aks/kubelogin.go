package aks

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/authvault/authvault/redact"
)

// The login modes of `kubelogin get-token` that Native serves: those of a
// process that runs unattended, with an identity of its own.
const (
	modeMSI              = "msi"
	modeWorkloadIdentity = "workloadidentity"
	modeSPN              = "spn"
)

// servedModes are the modes Native serves; kubelogin's others
// (devicecode, its default, interactive, azurecli, azd, ropc,
// azurepipelines) ask a person or a tool, and run the plugin as before.
var servedModes = []string{modeMSI, modeWorkloadIdentity, modeSPN}

// getToken is what a `kubelogin get-token` run would log in with, its
// flags and environment read as kubelogin v0.2.22 reads them.
type getToken struct {
	mode               string
	serverID           string
	clientID           string
	tenantID           string
	environment        string
	authorityHost      string
	authorityHostVar   string // the variable authorityHost came from, if one did
	tokenFile          string // workload identity's federated token
	identityResourceID string // a user-assigned managed identity's
	clientCert         string // a path
	timeout            time.Duration
	noDiscovery        bool // --disable-instance-discovery

	// Secrets: never in an error, a log line or a description.
	clientSecret       string
	clientCertPassword string
}

// isKubelogin tells whether exec runs `kubelogin get-token`.
func isKubelogin(exec clientcmdapi.ExecConfig) bool {
	return filepath.Base(exec.Command) == "kubelogin" && len(exec.Args) > 0 && exec.Args[0] == "get-token"
}

// plugin is the environment kubelogin would run in: the kubeconfig's
// variables over this process's.
type plugin struct{ env []clientcmdapi.ExecEnvVar }

// lookup is os.LookupEnv in the plugin's environment.
func (p plugin) lookup(name string) (string, bool) {
	for i := len(p.env) - 1; i >= 0; i-- {
		if p.env[i].Name == name {
			return p.env[i].Value, true
		}
	}
	return os.LookupEnv(name)
}

// override sets *field to the last of names the environment has, as
// kubelogin's UpdateFromEnv does: a variable that is set wins over the
// flag, even empty. It returns the name of that variable, "" when none is
// set: an error names it rather than quote its value.
func (p plugin) override(field *string, names ...string) (from string) {
	for _, n := range names {
		if v, ok := p.lookup(n); ok {
			*field, from = v, n
		}
	}
	return from
}

// boolFlag is the last value of a boolean flag among args.
func boolFlag(args []arg, name string) bool {
	v := false
	for _, a := range args {
		if a.name == name {
			v = a.value == "true"
		}
	}
	return v
}

// mode is the login mode kubelogin would use: AAD_LOGIN_METHOD, else
// --login, else devicecode; fromEnv tells whether AAD_LOGIN_METHOD set it.
func (p plugin) mode(args []arg) (mode string, fromEnv bool) {
	mode = "devicecode"
	for _, a := range args {
		if a.name == "--login" {
			mode = a.value
		}
	}
	if !boolFlag(args, "--disable-environment-override") {
		fromEnv = p.override(&mode, "AAD_LOGIN_METHOD") != ""
	}
	return mode, fromEnv
}

// serves tells whether exec is a kubelogin get-token whose mode Native
// serves.
func serves(exec clientcmdapi.ExecConfig) bool {
	if !isKubelogin(exec) {
		return false
	}
	_, args, err := parseArgs(exec.Args[1:])
	if err != nil {
		return true // served, so that the error is the login's
	}
	if slices.ContainsFunc(args, func(a arg) bool { return slices.Contains(unservedFlags, a.name) }) {
		return false
	}
	p := plugin{exec.Env}
	mode, _ := p.mode(args)
	if mode == modeWorkloadIdentity {
		// kubelogin then takes GitHub Actions' OIDC token instead.
		tok, _ := p.lookup("ACTIONS_ID_TOKEN_REQUEST_TOKEN")
		u, _ := p.lookup("ACTIONS_ID_TOKEN_REQUEST_URL")
		if tok != "" && u != "" {
			return false
		}
	}
	return slices.Contains(servedModes, mode)
}

// envNames are the variables kubelogin reads for g's mode: those a
// kubeconfig may set, each understood.
func envNames(mode string, azurerm, noOverride bool) []string {
	names := []string{"KUBECACHEDIR", "AZURE_CLI_TIMEOUT"}
	if noOverride {
		return names
	}
	names = append(names, "AAD_LOGIN_METHOD")
	if azurerm {
		names = append(names, "ARM_CLIENT_ID", "ARM_TENANT_ID")
		if mode == modeSPN {
			names = append(names, "ARM_CLIENT_SECRET", "ARM_CLIENT_CERTIFICATE_PATH", "ARM_CLIENT_CERTIFICATE_PASSWORD")
		}
	} else {
		names = append(names, "AAD_SERVICE_PRINCIPAL_CLIENT_ID", "AZURE_CLIENT_ID", "AZURE_TENANT_ID")
		if mode == modeSPN {
			names = append(names, "AAD_SERVICE_PRINCIPAL_CLIENT_SECRET", "AZURE_CLIENT_SECRET",
				"AAD_SERVICE_PRINCIPAL_CLIENT_CERTIFICATE", "AZURE_CLIENT_CERTIFICATE_PATH",
				"AAD_SERVICE_PRINCIPAL_CLIENT_CERTIFICATE_PASSWORD", "AZURE_CLIENT_CERTIFICATE_PASSWORD")
		}
	}
	if mode == modeWorkloadIdentity {
		names = append(names, "AZURE_CLIENT_ID", "AZURE_FEDERATED_TOKEN_FILE", "AZURE_AUTHORITY_HOST")
	}
	return names
}

// readGetToken is the login exec's `kubelogin get-token` asks for, or an
// error naming the argument or variable it does not understand (never the
// variable's value, nor an argument that is not a flag's name).
func readGetToken(exec clientcmdapi.ExecConfig) (*getToken, error) {
	switch {
	case filepath.Base(exec.Command) != "kubelogin":
		return nil, fmt.Errorf("command %q is not kubelogin", exec.Command)
	case !isKubelogin(exec):
		// Not quoted: what is there may be a flag's value.
		return nil, errors.New("the arguments do not start with get-token")
	}
	words, args, err := parseArgs(exec.Args[1:])
	if err != nil {
		return nil, err
	}
	p := plugin{exec.Env}
	mode, modeFromEnv := p.mode(args)
	g := &getToken{mode: mode, environment: "AzurePublicCloud", timeout: time.Minute}
	switch {
	case slices.Contains(servedModes, g.mode):
	case modeFromEnv:
		return nil, fmt.Errorf("AAD_LOGIN_METHOD names a mode this login does not serve (%s)", strings.Join(servedModes, ", "))
	default:
		return nil, fmt.Errorf("%s is not a mode this login serves (%s)", flagValue("--login", g.mode), strings.Join(servedModes, ", "))
	}
	for _, a := range args {
		f, ok := flags[a.name]
		if !ok || slices.Contains(unservedFlags, a.name) {
			return nil, fmt.Errorf("argument %s is not one this login understands", a.name)
		}
		if f.modes != nil && !slices.Contains(f.modes, g.mode) {
			return nil, fmt.Errorf("argument %s is not one --login %s takes", a.name, g.mode)
		}
		if err := f.set(g, a.value); err != nil {
			return nil, fmt.Errorf("argument %s %w", a.name, err)
		}
	}
	if len(words) > 0 {
		return nil, fmt.Errorf("%d positional arguments after get-token, which takes none", len(words))
	}
	azurerm, noOverride := boolFlag(args, "--use-azurerm-env-vars"), boolFlag(args, "--disable-environment-override")
	known := envNames(g.mode, azurerm, noOverride)
	for _, v := range exec.Env {
		if !slices.Contains(known, v.Name) {
			return nil, fmt.Errorf("environment variable %s is not one this login understands with --login %s", v.Name, g.mode)
		}
	}
	if t, ok := p.lookup("AZURE_CLI_TIMEOUT"); ok {
		if d, err := time.ParseDuration(t); err == nil { // kubelogin ignores a bad one
			g.timeout = d
		}
	}
	if !noOverride {
		g.fromEnv(p, azurerm)
	}
	return g, g.check()
}

// fromEnv applies kubelogin's environment, in kubelogin's order.
func (g *getToken) fromEnv(p plugin, azurerm bool) {
	if azurerm {
		p.override(&g.clientID, "ARM_CLIENT_ID")
		p.override(&g.clientSecret, "ARM_CLIENT_SECRET")
		p.override(&g.clientCert, "ARM_CLIENT_CERTIFICATE_PATH")
		p.override(&g.clientCertPassword, "ARM_CLIENT_CERTIFICATE_PASSWORD")
		p.override(&g.tenantID, "ARM_TENANT_ID")
	} else {
		p.override(&g.clientID, "AAD_SERVICE_PRINCIPAL_CLIENT_ID", "AZURE_CLIENT_ID")
		p.override(&g.clientSecret, "AAD_SERVICE_PRINCIPAL_CLIENT_SECRET", "AZURE_CLIENT_SECRET")
		p.override(&g.clientCert, "AAD_SERVICE_PRINCIPAL_CLIENT_CERTIFICATE", "AZURE_CLIENT_CERTIFICATE_PATH")
		p.override(&g.clientCertPassword, "AAD_SERVICE_PRINCIPAL_CLIENT_CERTIFICATE_PASSWORD", "AZURE_CLIENT_CERTIFICATE_PASSWORD")
		p.override(&g.tenantID, "AZURE_TENANT_ID")
	}
	if g.mode == modeWorkloadIdentity {
		p.override(&g.clientID, "AZURE_CLIENT_ID")
		p.override(&g.tokenFile, "AZURE_FEDERATED_TOKEN_FILE")
		g.authorityHostVar = p.override(&g.authorityHost, "AZURE_AUTHORITY_HOST")
	}
	if g.mode != modeSPN {
		// Read by kubelogin, used by spn alone.
		g.clientSecret, g.clientCert, g.clientCertPassword = "", "", ""
	}
}

// check refuses what kubelogin would refuse, and what this login cannot
// do as kubelogin would.
func (g *getToken) check() error {
	if g.serverID == "" {
		return errors.New("--server-id is required")
	}
	if g.authorityHost != "" {
		u, err := url.ParseRequestURI(g.authorityHost)
		if err != nil || u.Scheme != "https" || u.Host == "" || !strings.HasSuffix(g.authorityHost, "/") {
			if g.authorityHostVar != "" {
				return fmt.Errorf("%s: want an https URL that ends with a slash", g.authorityHostVar)
			}
			return fmt.Errorf("%s: want an https URL that ends with a slash", flagValue("--authority-host", redact.URL(g.authorityHost)))
		}
	} else if _, err := g.cloud(); err != nil {
		return err
	}
	need := func(what, v string) error {
		if v == "" {
			return fmt.Errorf("--login %s needs a %s", g.mode, what)
		}
		return nil
	}
	switch g.mode {
	case modeWorkloadIdentity:
		return errors.Join(need("client ID", g.clientID), need("tenant ID", g.tenantID), need("federated token file", g.tokenFile))
	case modeSPN:
		if g.clientCert == "" && g.clientSecret == "" {
			return errors.Join(need("client ID", g.clientID), need("tenant ID", g.tenantID), errors.New("--login spn needs a client secret or a client certificate"))
		}
		return errors.Join(need("client ID", g.clientID), need("tenant ID", g.tenantID))
	}
	return nil
}

// cloud is the Entra ID the token comes from: --authority-host, else the
// cloud --environment names (kubelogin's names; kubelogin takes any other
// for the public cloud, this login refuses it).
func (g *getToken) cloud() (cloud.Configuration, error) {
	if g.authorityHost != "" {
		return cloud.Configuration{ActiveDirectoryAuthorityHost: g.authorityHost}, nil
	}
	switch strings.ToUpper(g.environment) {
	case "AZURECLOUD", "AZUREPUBLIC", "AZUREPUBLICCLOUD":
		return cloud.AzurePublic, nil
	case "AZUREUSGOVERNMENT", "AZUREUSGOVERNMENTCLOUD":
		return cloud.AzureGovernment, nil
	case "AZURECHINACLOUD":
		return cloud.AzureChina, nil
	}
	return cloud.Configuration{}, fmt.Errorf("%s is not a cloud this login knows (AzurePublicCloud, AzureUSGovernmentCloud, AzureChinaCloud)",
		flagValue("--environment", g.environment))
}

// scope is kubelogin's: the server ID, "/.default" after it.
func (g *getToken) scope() string {
	s := strings.TrimRight(g.serverID, "/")
	if !strings.HasSuffix(s, "/.default") {
		s += "/.default"
	}
	return s
}

// describe names the identity, with no secret.
func (g *getToken) describe() string {
	switch g.mode {
	case modeMSI:
		switch {
		case g.clientID != "":
			return fmt.Sprintf("kubelogin --login msi (managed identity %q)", g.clientID)
		case g.identityResourceID != "":
			return fmt.Sprintf("kubelogin --login msi (managed identity %s)", g.identityResourceID)
		}
		return "kubelogin --login msi (system-assigned managed identity)"
	case modeWorkloadIdentity:
		return fmt.Sprintf("kubelogin --login workloadidentity (client %q, tenant %q, token file %s)", g.clientID, g.tenantID, g.tokenFile)
	}
	if g.clientCert != "" {
		return fmt.Sprintf("kubelogin --login spn (client %q, tenant %q, certificate %s)", g.clientID, g.tenantID, g.clientCert)
	}
	return fmt.Sprintf("kubelogin --login spn (client %q, tenant %q, client secret)", g.clientID, g.tenantID)
}
