// Package testkit is the home of what only tests, benchmarks and the demo
// use: a real API server with an issuer (testcluster), certificates and
// JWTs (testpki), exec plugins (testplugin), a logger into a test
// (testlog) and the rotation workload (rotation). Nothing a library user
// imports depends on it.
package testkit
