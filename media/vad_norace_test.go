//go:build !race

package media

const vadRace = false
