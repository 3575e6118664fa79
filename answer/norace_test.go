//go:build !race

package answer

// raceDetector is set when the tests run under -race.
const raceDetector = false
