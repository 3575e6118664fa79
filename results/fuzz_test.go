package results_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/lockbench/lockbench/results"
)

// FuzzRead: results.json is read back by lockbench report and check from
// a dir anyone may hand them. Read returns the file or an error, never
// panics; what it accepts, Write writes back to the same file; and every
// histogram it holds decodes or fails with an error.
func FuzzRead(f *testing.F) {
	h := results.NewHistogram()
	for _, v := range []int64{1, 10, 100, 1000, 250000} {
		h.RecordValue(v)
	}
	enc, err := results.Encode(h)
	if err != nil {
		f.Fatal(err)
	}
	good, err := json.Marshal(map[string]any{
		"version": results.Version, "started": "2026-12-03T10:00:00Z", "finished": "2026-12-03T10:05:00Z",
		"hosts": []string{"local"}, "machine": "2 cores, linux/amd64",
		"cases": []map[string]any{{
			"backend": "redlock", "workload": "contended", "fault": "none", "clients": 4, "acquired": 10,
			"histograms": map[string]string{"acquire": enc, "hold": "", "release": enc[:len(enc)/2]},
		}},
	})
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range [][]byte{
		good, []byte(`{"version":1}`), []byte(`{"version":2}`), []byte(`{"version":1,"cases":[{}]}`),
		[]byte(`{"version":1,"cases":[{"histograms":{"acquire":"HISTFAAAAA=="}}]}`),
		[]byte(`{"version":1,"started":"yesterday"}`), []byte(`[]`), []byte(`{`), nil,
	} {
		f.Add(seed)
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(dir, "results.json")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		file, err := results.Read(path)
		if err != nil {
			return
		}
		for _, c := range file.Cases {
			for _, s := range []string{c.Histograms.Acquire, c.Histograms.Hold, c.Histograms.Release} {
				results.Decode(s)
			}
		}
		if err := results.Write(path, file); err != nil {
			t.Fatalf("Write of what Read read: %v", err)
		}
		again, err := results.Read(path)
		if err != nil {
			t.Fatalf("Read of what Write wrote: %v", err)
		}
		if !reflect.DeepEqual(normal(t, again), normal(t, file)) {
			t.Fatalf("round trip changed the file")
		}
	})
}

// normal returns f as JSON: the comparison of two files that tolerates
// what JSON cannot tell apart (a nil and an empty slice, time zones).
func normal(t *testing.T, f *results.File) string {
	b, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// FuzzDecode: a histogram in results.json is base64 text anyone may
// edit. Decode returns a histogram or an error and never panics; what it
// accepts encodes and decodes again to the same counts.
func FuzzDecode(f *testing.F) {
	h := results.NewHistogram()
	for _, v := range []int64{1, 7, 100, 1000, 600000000} {
		h.RecordValue(v)
	}
	enc, err := results.Encode(h)
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range []string{enc, enc[:len(enc)-4], "", "HISTFAAAAA==", "HISTFAAAACB4nJNpmSzMwMDAxAABzFCaEUozAgA", "!!", "HISTF"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		h, err := results.Decode(s)
		if err != nil {
			return
		}
		e, err := results.Encode(h)
		if err != nil {
			return // an accepted histogram that cannot encode is not a panic
		}
		again, err := results.Decode(e)
		if err != nil {
			t.Fatalf("Decode of what Encode wrote: %v", err)
		}
		if again.TotalCount() != h.TotalCount() || again.Max() != h.Max() {
			t.Fatalf("round trip: %d values max %d, then %d max %d", h.TotalCount(), h.Max(), again.TotalCount(), again.Max())
		}
	})
}
