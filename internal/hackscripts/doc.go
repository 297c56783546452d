// Package hackscripts tests the shell scripts under hack/ that a person
// meets when something waits: what they print is their interface.
package hackscripts
