package bench

import (
	"fmt"
	"time"

	"github.com/lockbench/lockbench/history"
	"github.com/lockbench/lockbench/locker"
	"github.com/lockbench/lockbench/results"
)

// declared is the contract b's descriptor declares for a lease of ttl
// under params (the case's), or nil when it declares none: the judge
// draws the contract line with it, and the results record it.
func (b Backend) declared(ttl time.Duration, params map[string]string) (*locker.Info, error) {
	if b.Descriptor.Contract == nil {
		return nil, nil
	}
	info, err := b.Descriptor.Contract(ttl, params)
	if err != nil {
		return nil, fmt.Errorf("backend %s: its declared contract: %w", b.Spec, err)
	}
	return &info, nil
}

// judgeContract is the judge's form of a declared contract for ttl (nil
// for none).
func judgeContract(d *locker.Info, ttl time.Duration) *history.Contract {
	if d == nil {
		return nil
	}
	return &history.Contract{Promise: int64(d.Promise(ttl)), MaxValidity: int64(d.MaxValidity(ttl))}
}

// resultsContract is the results' form of a declared contract for ttl
// (nil for none): what a judge of its own records of it.
func resultsContract(d *locker.Info, ttl time.Duration) *results.Contract {
	if d == nil {
		return nil
	}
	return &results.Contract{PromiseNS: int64(d.Promise(ttl)), MaxValidityNS: int64(d.MaxValidity(ttl)),
		DriftRate: d.DriftRate, DriftMS: float64(d.Drift) / float64(time.Millisecond)}
}
