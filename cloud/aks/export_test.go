package aks

import (
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"

	"github.com/authvault/authvault/login"
)

// LoginWith is Login on a clock of the test's, with newDefault in place of
// DefaultAzureCredential's constructor.
func LoginWith(opts Options, now func() time.Time, newDefault func() (azcore.TokenCredential, error)) login.Handler {
	s := newSource(opts, now)
	s.newDefault = newDefault
	return s.login
}
