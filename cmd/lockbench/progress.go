package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/lockbench/lockbench/bench"
)

// progressEvery is how often a run whose output is not a terminal (a CI
// log, a file) prints where it is.
const progressEvery = 10 * time.Second

// lockedWriter serialises writes to w: the ticker's lines and the runner's
// come from different goroutines.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// ticker prints, every so often, which case of how many a run is in, the
// time since it started and an estimate of the time left: the progress
// of a run without a terminal, where no bar can redraw itself and a case
// may run for minutes without a line.
type ticker struct {
	w     io.Writer
	total int
	start time.Time
	stop  chan struct{}
	done  chan struct{}
	once  sync.Once

	mu       sync.Mutex
	index    int    // the case running (0-based), or finished cases when idle
	finished int    // cases finished
	current  string // the case running
}

// startTicker starts a ticker writing to w every interval for a run of
// total cases; Stop ends it.
func startTicker(w io.Writer, total int, every time.Duration) *ticker {
	t := &ticker{w: w, total: total, start: time.Now(), stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(t.done)
		tk := time.NewTicker(every)
		defer tk.Stop()
		for {
			select {
			case <-t.stop:
				return
			case <-tk.C:
				fmt.Fprintln(t.w, t.line(time.Now()))
			}
		}
	}()
	return t
}

// event follows the runner's progress: a case begins or ends.
func (t *ticker) event(e bench.Event) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.index = e.Index
	if e.Results == nil && e.Skipped == nil {
		t.current = e.Case.String()
		return
	}
	t.finished, t.current = e.Index+1, ""
}

// line says where the run is at now.
func (t *ticker) line(now time.Time) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	elapsed := now.Sub(t.start).Round(time.Second)
	left := "estimate after the first case"
	if t.finished > 0 {
		per := now.Sub(t.start) / time.Duration(t.finished)
		left = "about " + (per * time.Duration(t.total-t.finished)).Round(time.Second).String() + " left"
	}
	at := fmt.Sprintf("case %d of %d", t.index+1, t.total)
	if t.current == "" {
		at = fmt.Sprintf("%d of %d cases done", t.finished, t.total)
	} else {
		at += " (" + t.current + ")"
	}
	return fmt.Sprintf("lockbench: %s, %s elapsed, %s", at, elapsed, left)
}

// Stop ends the ticker; no line is written after it returns. A nil
// ticker (a run on a terminal, with a bar) and a stopped one do nothing.
func (t *ticker) Stop() {
	if t == nil {
		return
	}
	t.once.Do(func() { close(t.stop) })
	<-t.done
}

// unstartedError says at the end of a run, on w, which cases were skipped
// because their backends' servers would not start (skipped: their
// events), and returns an error saying so (a run with backends missing is
// not a run that passed), or nil when none were or keepGoing is set.
func unstartedError(w io.Writer, skipped []bench.Event, total int, keepGoing bool) error {
	if len(skipped) == 0 {
		return nil
	}
	var names []string
	for _, e := range skipped {
		if !slices.Contains(names, e.Case.Backend.Spec) {
			names = append(names, e.Case.Backend.Spec)
		}
	}
	err := fmt.Errorf("%d of %d cases not run, their servers would not start (%s); the first: %s: %w",
		len(skipped), total, strings.Join(names, ", "), skipped[0].Case, skipped[0].Skipped)
	if keepGoing {
		fmt.Fprintf(w, "lockbench: %v (--keep-going: exit 0)\n", err)
		return nil
	}
	return err
}
