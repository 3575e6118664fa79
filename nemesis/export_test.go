package nemesis

// What the external tests (package nemesis_test), which start real
// servers through the kinds' packages, need of the package's insides.

// StartAgain is startAgain: how a fault brings its nodes back.
var StartAgain = startAgain

// Lost is lost: the error of a fault whose nodes did not come back.
type Lost = lost
