// The soak: a module of its own, as the rotation demo is, so that what
// only the soak needs (its plotting library) never becomes a dependency of
// the library. Not published.
module github.com/authvault/authvault/hack/soak

go 1.26.0

replace github.com/authvault/authvault => ../..
