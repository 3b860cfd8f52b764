// Package funclen holds the test that keeps trainstep's product functions
// short: one over 80 lines is a concept that wants a name of its own. It
// has no code of its own.
package funclen
