package redsync

import (
	"strconv"
	"time"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/backends/redis"
	"github.com/lockbench/lockbench/locker"
)

func init() {
	backends.Register(backends.Descriptor{
		Name: "redsync",
		Doc:  "github.com/go-redsync/redsync/v4, the reference Go Redlock, on the same five masters as lockbench's",
		Open: Open,
		// Redlock's five masters: both are measured on the same nodes.
		Servers:       backends.Servers{Kind: backends.Redis, Count: 5},
		NotApplicable: redis.NotApplicable(5),
		// redsync's validity: the expiry less the attempt's time less
		// expiry×drift (its drift factor, the drift param).
		Contract: func(_ time.Duration, params map[string]string) (locker.Info, error) {
			drift, err := driftParam(params)
			return locker.Info{DriftRate: drift}, err
		},
		Probe: redis.Probe,
		Endpoints: backends.Endpoints{
			Flag:  "redsync",
			Usage: "the Redis masters of redsync",
			Or:    "redlock",
			Auth:  redis.Auth,
		},
	})
}

// driftParam is the drift factor a spec's params give redsync: its
// default without the drift param.
func driftParam(params map[string]string) (float64, error) {
	v, ok := params["drift"]
	if !ok {
		return defaultDrift, nil
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f < 0 || f >= 0.5 {
		return 0, locker.Invalidf("param drift=%q: want a number in [0, 0.5)", v)
	}
	return f, nil
}
