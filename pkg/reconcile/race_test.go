//go:build race

package reconcile

// raceEnabled: under the race detector the simulation runs fewer schedules
// by default (each costs about ten times as much).
const raceEnabled = true
