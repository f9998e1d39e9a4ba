//go:build race

package groupcommit

// raceEnabled reports a build with the race detector.
const raceEnabled = true
