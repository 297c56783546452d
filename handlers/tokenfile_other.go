//go:build !unix

package handlers

// openNonBlocking is unix's O_NONBLOCK; elsewhere opening needs no flag.
const openNonBlocking = 0
