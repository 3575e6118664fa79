package results

import (
	"fmt"
	"slices"
)

// Merge combines results files measured at the same time by several
// load-generator hosts into one: cases with the same Key and Trial are
// added up (counts and timelines summed, histograms merged, so the
// percentiles are those of all the hosts' operations together, without
// loss), and cases only one host measured are kept as they are.
func Merge(files ...*File) (*File, error) {
	if len(files) == 0 {
		return nil, fmt.Errorf("merge: no results")
	}
	out := &File{Version: Version, Started: files[0].Started, Finished: files[0].Finished, Machine: files[0].Machine}
	index := map[string]int{}
	for _, f := range files {
		if f.Started.Before(out.Started) {
			out.Started = f.Started
		}
		if f.Finished.After(out.Finished) {
			out.Finished = f.Finished
		}
		out.Partial = out.Partial || f.Partial
		for _, h := range f.Hosts {
			if !slices.Contains(out.Hosts, h) {
				out.Hosts = append(out.Hosts, h)
			}
		}
		for _, c := range f.Cases {
			k := fmt.Sprintf("%s|%d", c.Key(), c.Trial)
			i, ok := index[k]
			if !ok {
				index[k] = len(out.Cases)
				out.Cases = append(out.Cases, c)
				continue
			}
			merged, err := mergeCase(out.Cases[i], c)
			if err != nil {
				return nil, fmt.Errorf("merge %s trial %d: %w", c.Key(), c.Trial, err)
			}
			out.Cases[i] = merged
		}
	}
	return out, nil
}

func mergeCase(a, b Case) (Case, error) {
	m := a
	m.Host = joinHosts(a.Host, b.Host)
	m.Clients = a.Clients // the same combination: clients per host
	m.Acquired += b.Acquired
	m.DurationS = max(a.DurationS, b.DurationS)
	if m.DurationS > 0 {
		m.Throughput = float64(m.Acquired) / m.DurationS
	}
	m.Overlaps += b.Overlaps
	m.StaleAccepted += b.StaleAccepted
	m.StaleRejected += b.StaleRejected
	m.LostUpdates += b.LostUpdates
	m.TokenRegressions += b.TokenRegressions
	m.Errors = map[string]int64{}
	for _, e := range []map[string]int64{a.Errors, b.Errors} {
		for k, v := range e {
			m.Errors[k] += v
		}
	}
	m.Timeline = make([]int64, max(len(a.Timeline), len(b.Timeline)))
	for i := range m.Timeline {
		if i < len(a.Timeline) {
			m.Timeline[i] += a.Timeline[i]
		}
		if i < len(b.Timeline) {
			m.Timeline[i] += b.Timeline[i]
		}
	}
	m.Notes = append(slices.Clone(a.Notes), b.Notes...)
	var err error
	if m.Histograms.Acquire, m.LatencyUS, err = mergeHist(a.Histograms.Acquire, b.Histograms.Acquire); err != nil {
		return m, err
	}
	if m.Histograms.Hold, m.HoldUS, err = mergeHist(a.Histograms.Hold, b.Histograms.Hold); err != nil {
		return m, err
	}
	if m.Histograms.Release, m.ReleaseUS, err = mergeHist(a.Histograms.Release, b.Histograms.Release); err != nil {
		return m, err
	}
	return m, nil
}

func mergeHist(a, b string) (string, Percentiles, error) {
	ha, err := Decode(a)
	if err != nil {
		return "", Percentiles{}, err
	}
	hb, err := Decode(b)
	if err != nil {
		return "", Percentiles{}, err
	}
	ha.Merge(hb)
	s, err := Encode(ha)
	return s, Summarise(ha), err
}

func joinHosts(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "" || a == b:
		return a
	}
	return a + "+" + b
}
