//go:build race

package sip_test

// raceEnabled is set in race builds, whose CPU cost is several times a normal build's: the load
// test then gives each call a lighter conversation (no greeting to synthesize).
const raceEnabled = true
