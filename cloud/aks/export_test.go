package aks

import (
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"

	"github.com/authvault/authvault/login"
)

// LoginWith is Login on a clock of the test's, with newDefault in place of
// DefaultAzureCredential's constructor.
func LoginWith(opts Options, now func() time.Time, newDefault func() (azcore.TokenCredential, error)) login.Handler {
	s := newSource(opts, now)
	s.newDefault = newDefault
	return s.login
}

// UseTransport makes Native's credentials send their requests through tr,
// until restore.
func UseTransport(tr policy.Transporter) (restore func()) {
	old := transport
	transport = tr
	return func() { transport = old }
}
