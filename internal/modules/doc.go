// Package modules holds the test that keeps the repository's modules apart:
// no package of one module (the root, a cloud login, the demo, a tool of
// hack/) imports an internal package of another. Go's internal rule goes by
// import path, so it lets cloud/eks import the root's internal/; but a
// later release of the root may change or remove such a package and break a
// published cloud module. What the modules share is an exported package.
//
// It also keeps the root module's imports running down: the top-level
// internal/ is the ground floor, and nothing the build compiles there
// imports a public package (floors_test.go).
package modules
