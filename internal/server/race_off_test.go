//go:build !race

package server_test

// raceDetector says the test binary is built with -race.
const raceDetector = false

// bigState is the size of the states TestStatePushMemory pushes: close to protocol.MaxStateBytes,
// as in the probe that found 4 concurrent pushes of one user peaking at 1.3 GB.
const bigState = 60 << 20
