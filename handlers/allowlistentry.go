package handlers

import (
	"reflect"

	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// allowlistCommand is the index of the field that holds an allowlist
// entry's command. client-go names it Name up to v0.35 and Command from
// v0.36; the releases this module supports span both, so the field is
// found by name once, here, instead of in code that only one of them
// compiles.
var allowlistCommand = func() []int {
	t := reflect.TypeFor[clientcmdapi.AllowlistEntry]()
	for _, name := range []string{"Command", "Name"} {
		if f, ok := t.FieldByName(name); ok && f.Type.Kind() == reflect.String {
			return f.Index
		}
	}
	panic("handlers: client-go's AllowlistEntry has neither a Command nor a Name field")
}()

// allowlistEntry is the allowlist entry for command.
func allowlistEntry(command string) clientcmdapi.AllowlistEntry {
	var e clientcmdapi.AllowlistEntry
	reflect.ValueOf(&e).Elem().FieldByIndex(allowlistCommand).SetString(command)
	return e
}

// entryCommand is the command an allowlist entry names.
func entryCommand(e clientcmdapi.AllowlistEntry) string {
	return reflect.ValueOf(e).FieldByIndex(allowlistCommand).String()
}
