package handlers

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/authvault/authvault/redact"
)

// An ExecConfig may carry secrets: env values (AWS_SECRET_ACCESS_KEY, a
// session token), args (--token=...), the cluster's extension config and
// the cluster's credentials. Every way of printing one (fmt's verbs, String,
// GoString, JSON, logr) shows env names but no value, the number of args but
// none of them, whether there is a config but not its content, the cluster
// redacted as login.ConnectionInfo is, and only the types of Stdin and
// Stderr. client-go's own ExecConfig redacts in fmt only; the embedded one
// here is never printed as it is.

// execView is the printable form of an ExecConfig.
type execView struct {
	Command                 string        `json:"command"`
	Args                    []string      `json:"args,omitempty"`
	Env                     []execEnvView `json:"env,omitempty"`
	APIVersion              string        `json:"apiVersion,omitempty"`
	InstallHint             string        `json:"installHint,omitempty"`
	ProvideClusterInfo      bool          `json:"provideClusterInfo,omitempty"`
	Config                  string        `json:"config,omitempty"`
	InteractiveMode         string        `json:"interactiveMode,omitempty"`
	StdinUnavailable        bool          `json:"stdinUnavailable,omitempty"`
	StdinUnavailableMessage string        `json:"stdinUnavailableMessage,omitempty"`
	PluginPolicy            string        `json:"pluginPolicy,omitempty"`
	Cluster                 any           `json:"cluster"`
	DisableCompression      bool          `json:"disableCompression,omitempty"`
	ProvideResponse         bool          `json:"provideResponse,omitempty"`
	Stdin                   string        `json:"stdin,omitempty"`
	Stderr                  string        `json:"stderr,omitempty"`
}

type execEnvView struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

func (cfg ExecConfig) view() execView {
	v := execView{
		Command:                 cfg.Command,
		APIVersion:              cfg.APIVersion,
		InstallHint:             cfg.InstallHint,
		ProvideClusterInfo:      cfg.ProvideClusterInfo,
		InteractiveMode:         string(cfg.InteractiveMode),
		StdinUnavailable:        cfg.StdinUnavailable,
		StdinUnavailableMessage: cfg.StdinUnavailableMessage,
		PluginPolicy:            string(cfg.PluginPolicy.PolicyType),
		Cluster:                 cfg.Cluster.MarshalLog(),
		DisableCompression:      cfg.DisableCompression,
		ProvideResponse:         cfg.ProvideResponse,
	}
	for range cfg.Args {
		v.Args = append(v.Args, redact.Marker)
	}
	for _, e := range cfg.Env {
		value := ""
		if e.Value != "" {
			value = redact.Marker
		}
		v.Env = append(v.Env, execEnvView{Name: e.Name, Value: value})
	}
	if cfg.Config != nil {
		v.Config = redact.Marker
	}
	if cfg.Stdin != nil {
		v.Stdin = fmt.Sprintf("%T", cfg.Stdin)
	}
	if cfg.Stderr != nil {
		v.Stderr = fmt.Sprintf("%T", cfg.Stderr)
	}
	return v
}

// String shows the ExecConfig with its secrets redacted.
func (cfg ExecConfig) String() string {
	v := cfg.view()
	var b strings.Builder
	b.WriteString("handlers.ExecConfig{Command: ")
	b.WriteString(strconv.Quote(v.Command))
	field := func(name, value string) {
		if value != "" {
			b.WriteString(", " + name + ": " + value)
		}
	}
	if len(v.Args) > 0 {
		field("Args", "["+strings.Join(v.Args, " ")+"]")
	}
	if len(v.Env) > 0 {
		env := make([]string, len(v.Env))
		for i, e := range v.Env {
			env[i] = e.Name + "=" + e.Value
		}
		field("Env", "["+strings.Join(env, " ")+"]")
	}
	field("APIVersion", quoteNonEmpty(v.APIVersion))
	field("InstallHint", quoteNonEmpty(v.InstallHint))
	if v.ProvideClusterInfo {
		field("ProvideClusterInfo", "true")
	}
	field("Config", v.Config)
	field("InteractiveMode", quoteNonEmpty(v.InteractiveMode))
	if v.StdinUnavailable {
		field("StdinUnavailable", "true")
	}
	field("StdinUnavailableMessage", quoteNonEmpty(v.StdinUnavailableMessage))
	field("PluginPolicy", quoteNonEmpty(v.PluginPolicy))
	field("Cluster", cfg.Cluster.String())
	if v.DisableCompression {
		field("DisableCompression", "true")
	}
	if v.ProvideResponse {
		field("ProvideResponse", "true")
	}
	field("Stdin", v.Stdin)
	field("Stderr", v.Stderr)
	b.WriteString("}")
	return b.String()
}

func quoteNonEmpty(s string) string {
	if s == "" {
		return ""
	}
	return strconv.Quote(s)
}

// GoString makes %#v show the redacted form too.
func (cfg ExecConfig) GoString() string { return cfg.String() }

// Format makes every fmt verb print the redacted form.
func (cfg ExecConfig) Format(f fmt.State, verb rune) {
	redact.Print(f, verb, cfg.String())
}

// MarshalJSON encodes the redacted form, with the kubeconfig's field names.
func (cfg ExecConfig) MarshalJSON() ([]byte, error) { return json.Marshal(cfg.view()) }

// MarshalLog implements logr.Marshaler: loggers print the redacted form.
func (cfg ExecConfig) MarshalLog() any { return cfg.view() }
