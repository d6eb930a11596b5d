//go:build race

package faults

// raceEnabled: the test binary has the race detector, and so do the services it builds.
const raceEnabled = true
