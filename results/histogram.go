package results

import (
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
)

// Percentiles summarise a latency distribution, in microseconds.
type Percentiles struct {
	P50  int64   `json:"p50"`
	P90  int64   `json:"p90"`
	P99  int64   `json:"p99"`
	P999 int64   `json:"p999"`
	Max  int64   `json:"max"`
	Mean float64 `json:"mean"`
}

// Histograms holds HDR histograms of microseconds in their compressed,
// base64 encoding.
type Histograms struct {
	Acquire string `json:"acquire"`
	Hold    string `json:"hold"`
	Release string `json:"release"`
}

// NewHistogram returns a histogram of microseconds from 1 µs to 10 min
// with 3 significant digits, the one every Case uses.
func NewHistogram() *hdr.Histogram { return hdr.New(1, int64(10*time.Minute/time.Microsecond), 3) }

// Encode returns h in its compressed base64 encoding.
func Encode(h *hdr.Histogram) (string, error) {
	b, err := h.Encode(hdr.V2CompressedEncodingCookieBase)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// Decode parses a histogram from Encode. An empty string is an empty
// histogram.
func Decode(s string) (*hdr.Histogram, error) {
	if s == "" {
		return NewHistogram(), nil
	}
	return hdr.Decode([]byte(s))
}

// MergeEncoded merges histograms in Encode's form into one, in the same
// form. Empty strings are empty histograms.
func MergeEncoded(encoded ...string) (string, error) {
	m := NewHistogram()
	for _, e := range encoded {
		h, err := Decode(e)
		if err != nil {
			return "", err
		}
		m.Merge(h)
	}
	return Encode(m)
}

// Summarise returns the percentiles of h.
func Summarise(h *hdr.Histogram) Percentiles {
	if h.TotalCount() == 0 {
		return Percentiles{}
	}
	return Percentiles{
		P50: h.ValueAtQuantile(50), P90: h.ValueAtQuantile(90), P99: h.ValueAtQuantile(99),
		P999: h.ValueAtQuantile(99.9), Max: h.Max(), Mean: h.Mean(),
	}
}
