package handlers

import (
	"fmt"
	"reflect"
	"sync"

	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/authvault/authvault/login"
)

// allowlistCommand is the index of the field that holds an allowlist
// entry's command. client-go names it Name up to v0.35 and Command from
// v0.36; the releases this module supports span both, so the field is
// found by name once, here, instead of in code that only one of them
// compiles. A client-go that has neither (a newer one, which a program's
// go.mod may select) makes allowlist policies fail where they are used,
// with this error, never the program at start.
var allowlistCommand = sync.OnceValues(func() ([]int, error) {
	return commandField(reflect.TypeFor[clientcmdapi.AllowlistEntry]())
})

// commandField is the index of t's string field Command, else Name.
func commandField(t reflect.Type) ([]int, error) {
	for _, name := range []string{"Command", "Name"} {
		if f, ok := t.FieldByName(name); ok && f.Type.Kind() == reflect.String {
			return f.Index, nil
		}
	}
	return nil, fmt.Errorf("client-go's %v has no string Command or Name field", t)
}

// allowlistEntry is the allowlist entry for command; an entry that names
// nothing when the entry's field cannot be found (policyAllows refuses the
// policy then).
func allowlistEntry(command string) clientcmdapi.AllowlistEntry {
	var e clientcmdapi.AllowlistEntry
	if index, err := allowlistCommand(); err == nil {
		reflect.ValueOf(&e).Elem().FieldByIndex(index).SetString(command)
	}
	return e
}

// entryCommand is the command an allowlist entry names, or "" when the
// entry's field cannot be found.
func entryCommand(e clientcmdapi.AllowlistEntry) string {
	index, err := allowlistCommand()
	if err != nil {
		return ""
	}
	return reflect.ValueOf(e).FieldByIndex(index).String()
}

// allowlistReadable returns nil when allowlist entries can be read, and
// else a permanent error that says command is not allowed, and why.
func allowlistReadable(command string) error {
	if _, err := allowlistCommand(); err != nil {
		return login.Permanent(fmt.Errorf("handlers: exec plugin %q is not allowed: plugin policy %s cannot be read with this client-go: %w", command, clientcmdapi.PluginPolicyAllowlist, err))
	}
	return nil
}
