package eks

import (
	"fmt"
	"os"
)

// envLookup reads this process's environment.
var envLookup = os.LookupEnv

// defaultChainSource names, for errors, where aws-sdk-go-v2's default chain
// takes credentials from in an environment read by lookup, in the SDK's
// order: static keys in the environment, then a web identity token file,
// then the shared config's profile, which falls back to the container
// endpoint (EKS Pod Identity) and then IMDS. It names variables and the role
// ARN, never a value that is a secret.
func defaultChainSource(lookup func(string) (string, bool)) string {
	set := func(name string) bool { v, ok := lookup(name); return ok && v != "" }
	value := func(name string) string { v, _ := lookup(name); return v }
	switch {
	case set("AWS_ACCESS_KEY_ID") && set("AWS_SECRET_ACCESS_KEY"):
		return "the environment (AWS_ACCESS_KEY_ID)"
	case set("AWS_WEB_IDENTITY_TOKEN_FILE"):
		return fmt.Sprintf("web identity (AWS_ROLE_ARN=%s, AWS_WEB_IDENTITY_TOKEN_FILE=%s)",
			value("AWS_ROLE_ARN"), value("AWS_WEB_IDENTITY_TOKEN_FILE"))
	}
	profile := "default"
	if set("AWS_PROFILE") {
		profile = value("AWS_PROFILE")
	}
	fallback := "IMDS"
	if set("AWS_CONTAINER_CREDENTIALS_FULL_URI") || set("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI") {
		fallback = "the container endpoint (EKS Pod Identity)"
	}
	return fmt.Sprintf("the shared config (profile %q), else %s", profile, fallback)
}
