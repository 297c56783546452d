package testcluster

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"

	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
)

// AuditedGroup is the group whose members' requests the API server writes
// to its audit log, at the Metadata level (who, what, and whom they
// impersonated), once each has been answered: give it to a test's client
// (a client certificate's organization) to read its requests back with
// AuditEvents. No one else's requests are logged.
const AuditedGroup = "authvault:audited"

// auditPolicy logs AuditedGroup's requests alone. A policy's userGroups are
// the groups of who authenticated, the impersonator when a request
// impersonates.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived, ResponseStarted, Panic]
rules:
- level: Metadata
  userGroups: ["` + AuditedGroup + `"]
- level: None
`

// auditFlags writes the audit policy into dir and returns the API server's
// flags that log to a file beside it.
func auditFlags(dir string) (flags map[string]string, log string, err error) {
	policy := dir + "/audit-policy.yaml"
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		return nil, "", err
	}
	log = dir + "/audit.log"
	return map[string]string{"audit-policy-file": policy, "audit-log-path": log}, log, nil
}

// AuditEvents returns the audit log's events so far: the requests of
// AuditedGroup's members, oldest first. An event is written once the
// request has been answered, so a test that has just made one polls.
func (c *Cluster) AuditEvents() ([]auditv1.Event, error) {
	raw, err := os.ReadFile(c.auditLog)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("testcluster: reading the audit log: %w", err)
	}
	var events []auditv1.Event
	lines := bufio.NewScanner(bytes.NewReader(raw))
	lines.Buffer(nil, 1<<20)
	for lines.Scan() {
		var e auditv1.Event
		if err := json.Unmarshal(lines.Bytes(), &e); err != nil {
			// The API server may be writing the last line.
			break
		}
		events = append(events, e)
	}
	return events, nil
}
