//go:build !race

package nemesis_test

// raceDetector reports that the tests run under the race detector, which
// makes every operation several times slower.
const raceDetector = false
