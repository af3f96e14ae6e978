//go:build !race

package server_test

// raceDetector says the test binary is built with -race.
const raceDetector = false
