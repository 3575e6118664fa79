package suites_test

import (
	"fmt"
	"time"

	"github.com/lockbench/lockbench/judge"
	"github.com/lockbench/lockbench/suites"
	"github.com/lockbench/lockbench/workloads"
)

// A suite built by hand, as `lockbench advise` builds one from a service
// profile: a load and rules (In does not matter here: a hand-built suite
// takes every rule it is given). Plan gives the cases, and every fault
// class a backend is left without, with why.
func ExampleSuite_Plan() {
	hold, _ := workloads.Constant(time.Millisecond)
	s := suites.Suite{
		Name: "advise",
		Load: suites.Load{
			Workloads: []workloads.Workload{workloads.Hot}, Clients: []int{8}, PerfSeconds: 1,
			FaultClients: 4, FaultSeconds: 5, Injections: 2, Guards: []judge.Guard{judge.GuardFence},
			TTL: time.Second, Hold: hold,
		},
		Rules: []suites.Rule{
			{Backends: suites.Specs("redlock", "etcd"), Faults: []string{suites.Sweep, "client-pause"}},
			{Backends: suites.Specs("etcd"), Faults: []string{"failover"}},
		},
	}
	plan, err := s.Plan()
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, c := range plan.Cases {
		fmt.Println(c)
	}
	for _, skip := range plan.Skipped {
		fmt.Printf("%s under %s: not run\n", skip.Backend, skip.FaultClass)
	}
	// Output:
	// etcd hot/none guards=[none] clients=8×goroutines fast trial=0
	// redlock hot/none guards=[none] clients=8×goroutines fast trial=0
	// etcd hot/client-pause guards=[fence] clients=4×processes fast trial=0
	// redlock hot/client-pause guards=[fence] clients=4×processes fast trial=0
	// etcd under failover: not run
	// redlock under failover: not run
}
