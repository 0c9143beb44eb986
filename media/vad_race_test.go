//go:build race

package media

// vadRace is true under the race detector, which slows the VAD measurement tenfold: the test
// then measures one rate and one mode only (the accuracy itself is checked in normal runs).
const vadRace = true
