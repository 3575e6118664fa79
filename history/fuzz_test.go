package history

import (
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

// FuzzReadFile: a history file is read back by lockbench check from a
// results dir anyone may hand it. The fuzzer writes JSON lines, which
// are gzipped into a file as WriteFile does. ReadFile returns the ops or
// an error, never panics; what it reads, WriteFile writes back to the
// same ops; and the checkers run over whatever it accepted without
// panicking.
func FuzzReadFile(f *testing.F) {
	for _, seed := range []string{
		`{"index":0,"process":1,"f":"acquire","type":"invoke","key":"k","invoke":1,"complete":1}` + "\n" +
			`{"index":1,"process":1,"f":"acquire","type":"ok","key":"k","section":1,"invoke":1,"complete":5,"token":3,"has_token":true,"valid_until":100}` + "\n" +
			`{"index":2,"process":1,"f":"write","type":"ok","key":"k","section":1,"guard":"fence","invoke":6,"complete":6,"token":3,"has_token":true}` + "\n" +
			`{"index":3,"process":1,"f":"release","type":"ok","key":"k","section":1,"invoke":7,"complete":9}` + "\n",
		`{"index":0,"process":2,"f":"acquire","type":"info","key":"k","invoke":1,"complete":2}`,
		`{"index":0,"f":"nope","type":"ok"}`,
		`{"index":-5,"process":-1,"f":"release","type":"ok","key":"","section":-3,"invoke":9,"complete":1}`,
		`{"index":0}{"index":0}`,
		`[]`,
		`{`,
		``,
	} {
		f.Add([]byte(seed))
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, lines []byte) {
		path := filepath.Join(dir, "history.jsonl.gz")
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		zw.Write(lines)
		zw.Close()
		if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		ops, err := ReadFile(path)
		if err != nil {
			return
		}
		if err := WriteFile(path, ops); err != nil {
			t.Fatalf("WriteFile of what ReadFile read: %v", err)
		}
		again, err := ReadFile(path)
		if err != nil {
			t.Fatalf("ReadFile of what WriteFile wrote: %v", err)
		}
		if len(ops) > 0 && !reflect.DeepEqual(again, ops) {
			t.Fatalf("round trip changed the ops:\n%+v\nthen\n%+v", ops, again)
		}
		for _, fenced := range []bool{false, true} {
			Check(ops, "fence", fenced)
		}
		Landings(ops)
		Linearizable(ops, 50*time.Millisecond)
		LinearizableFenced(ops, 50*time.Millisecond)
	})
}
