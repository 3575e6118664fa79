package main

import (
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/lockbench/lockbench/bench"
)

// holdLeft is --hold-left as given: a fraction of the validity a lease
// has left ("0.5", workloads.Spec.HoldLeft), or a duration ("3s",
// workloads.Spec.HoldFor) a holder holds whatever its lease says.
type holdLeft struct {
	fraction float64
	duration time.Duration
}

// parseHoldLeft reads --hold-left: a bare number is a fraction, a number
// with a unit a duration. The error names the value.
func parseHoldLeft(s string) (holdLeft, error) {
	if s == "" {
		return holdLeft{}, nil
	}
	if x, err := strconv.ParseFloat(s, 64); err == nil {
		return holdLeft{fraction: x}, nil // its range is the load's to check
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return holdLeft{}, fmt.Errorf("%w: --hold-left %q: want a fraction (0.5) or a positive duration (3s)", bench.ErrConfig, s)
	}
	return holdLeft{duration: d}, nil
}

// acquireTimeout is the acquire timeout of a long hold when none was
// given: a waiter on a hot key may queue behind every other client's
// hold, and one that gives up is an error of the load, not of the lock.
func (h holdLeft) acquireTimeout(given time.Duration, clients []int) time.Duration {
	if h.duration == 0 || len(clients) == 0 {
		return given
	}
	return max(given, time.Duration(slices.Max(clients))*h.duration+given)
}
