package workloads

// The case harness of the package's own tests, for its external tests.
var (
	RunCase  = runCase
	EveryNth = everyNth
)
