//go:build race

package executor_test

// raceEnabled: the tests run under the race detector, so the helper
// programs they build are built with it too.
const raceEnabled = true
