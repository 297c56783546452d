package main

import (
	"fmt"
	"strings"
)

// panelTitle is a scenario's panel's title: what the issuer does, and on
// a second line what the panel shows, written from the run's own figures
// so that it is true of what is drawn whatever the machine made of it.
func panelTitle(r *result) string {
	return r.scenario.name + ": " + r.scenario.title + "\n" + claim(r)
}

// claim is the story a scenario tells, in its figures. Each scenario
// leads with what it is about: the re-login both sides pay for a revoked
// token and the 401s only one hands on; the plugin's run an expiry makes
// callers wait for; the errors and the stall of an outage.
func claim(r *result) string {
	var parts []string
	switch r.scenario.name {
	case "revocation":
		parts = append(parts, relogin(r.sides), perSide(r.sides, "caller-visible 401s", func(f figures) int64 { return f.unauthorized }))
		other := func(f figures) int64 { return f.other }
		if anyOf(r.sides, other) {
			parts = append(parts, perSide(r.sides, "other errors", other))
		}
	case "expiry":
		parts = append(parts, perSide(r.sides, "requests that waited for a credential", func(f figures) int64 { return f.slow }),
			longest(r.sides))
	default:
		parts = append(parts, perSide(r.sides, "caller-visible errors", func(f figures) int64 { return f.unauthorized + f.other }),
			longest(r.sides))
	}
	return strings.Join(parts, "; ")
}

// relogin says what the re-logins cost each side: the requests that
// waited for a credential, which a revoked token costs both when both
// waited.
func relogin(sides []*side) string {
	waited := perSide(sides, "requests waited", func(f figures) int64 { return f.slow })
	for _, s := range sides {
		if s.figures.slow == 0 {
			return waited
		}
	}
	return "both sides wait for a new token (" + waited + ")"
}

// perSide is "what: authvault N, client-go M".
func perSide(sides []*side, what string, of func(figures) int64) string {
	var b strings.Builder
	b.WriteString(what + ":")
	for i, s := range sides {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, " %s %d", short(s.name), of(s.figures))
	}
	return b.String()
}

// longest is each side's longest request.
func longest(sides []*side) string {
	var b strings.Builder
	b.WriteString("longest request:")
	for i, s := range sides {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, " %s %s", short(s.name), round(s.figures.longest))
	}
	return b.String()
}

func anyOf(sides []*side, of func(figures) int64) bool {
	for _, s := range sides {
		if of(s.figures) > 0 {
			return true
		}
	}
	return false
}
