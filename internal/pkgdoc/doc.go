// Package pkgdoc holds the test that keeps the published packages' docs
// written for their users, as pkg.go.dev shows them: each package doc opens
// with what the package is for and a few lines of code, no exported doc
// names a source file, a test or an internal package, no exported
// declaration shows a type of an internal package, and no exported variable
// is a slice or a map that every importer could change.
package pkgdoc
