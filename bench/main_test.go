package bench_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	_ "github.com/lockbench/lockbench/backends/all"
	"github.com/lockbench/lockbench/worker"
)

// workerEnv makes the test binary a worker process (worker.Main), so
// that the runner's client processes are real processes of this binary.
const workerEnv = "LOCKBENCH_BENCH_WORKER"

func TestMain(m *testing.M) {
	if os.Getenv(workerEnv) == "1" {
		if err := worker.Main(context.Background(), os.Stdin); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// testWorker starts client processes of this test binary.
func testWorker() worker.Command {
	return worker.Command{Path: os.Args[0], Env: []string{workerEnv + "=1"}}
}
