//go:build !race

package conformance

// raceEnabled: the tests run without the race detector.
const raceEnabled = false
