//go:build !race

package sip_test

const raceEnabled = false
