package handlers

import (
	"context"
	"testing"

	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/authvault/authvault/login"
)

// BenchmarkExec is a plugin's start-to-credential latency: starting the Go
// test plugin, its run, and parsing its ExecCredential into a credential.
// BenchmarkExec/true is the floor: starting a process that does nothing.
func BenchmarkExec(b *testing.B) {
	for _, bc := range []struct {
		name, command string
	}{{"plugin", pluginPath}, {"true", "true"}} {
		b.Run(bc.name, func(b *testing.B) {
			h := Exec(ExecConfig{
				ExecConfig: clientcmdapi.ExecConfig{
					Command: bc.command, APIVersion: execV1, InteractiveMode: clientcmdapi.NeverExecInteractiveMode,
					ProvideClusterInfo: true,
				},
				Cluster: login.ConnectionInfo{Server: "https://api.example:6443"},
			})
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				_, err := h(ctx)
				if bc.command == pluginPath && err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
