//go:build race

package server_test

// raceDetector says the test binary is built with -race.
const raceDetector = true

// bigState is the size of the states TestStatePushMemory pushes. Under the race detector, which
// makes each push several times slower and its memory meaningless, the smallest size that still
// fills the server's budget alone (over half of it).
const bigState = 33 << 20
