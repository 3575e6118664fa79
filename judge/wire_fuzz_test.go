package judge

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"testing"
	"time"
)

// FuzzWire: the judge reads JSON lines from any process that reaches its
// port. Whatever a connection sends, the judge answers or drops it and
// never panics (a panic in its goroutines ends the fuzzing process), and
// it goes on serving: after each input, a new connection's "run" request
// gets the run's id.
func FuzzWire(f *testing.F) {
	for _, seed := range []string{
		`{"op":"run"}`,
		`{"op":"hello","case":"c1","host":"h","process":1,"pid":42}`,
		`{"op":"hello","case":"c1","host":"h","process":1}` + "\n" + `{"op":"ready"}` + "\n" + `{"op":"done"}`,
		`{"op":"open","host":"h","spec":{}}`,
		`{"op":"open"}`,
		`{"op":"finish","host":"h","case":"nope"}`,
		`{"op":"gone","case":"c1","process":2,"why":"killed"}`,
		`{"op":"stop","case":"c1"}`,
		`{"op":"live","case":"c1"}`,
		`{"op":"injected","case":"c1","injections":{}}`,
		`{"op":"pause","case":"c1","length":-1}`,
		`{"op":"hooks","case":"c1"}` + "\n" + `{"op":"action","call":1,"action":{}}`,
		`{"op":"grant","grant":{}}`,
		`{"op":"nope"}`,
		`{"op":1}`,
		`{`,
		"\x00\xff",
		"",
	} {
		f.Add([]byte(seed))
	}
	j, err := New(Options{})
	if err != nil {
		f.Fatal(err)
	}
	if err := j.Listen("127.0.0.1:0"); err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { j.Close() })
	f.Fuzz(func(t *testing.T, data []byte) {
		conn, err := net.Dial("tcp", j.Addr())
		if err != nil {
			t.Fatal(err)
		}
		conn.SetDeadline(time.Now().Add(2 * time.Second))
		conn.Write(append(data, '\n'))
		conn.(*net.TCPConn).CloseWrite()
		io.Copy(io.Discard, conn) // until the judge closes it, or the deadline
		conn.Close()

		conn, err = net.Dial("tcp", j.Addr())
		if err != nil {
			t.Fatalf("the judge stopped accepting after %q: %v", data, err)
		}
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := conn.Write([]byte(`{"op":"run"}` + "\n")); err != nil {
			t.Fatal(err)
		}
		line, err := bufio.NewReader(conn).ReadBytes('\n')
		if err != nil {
			t.Fatalf("no reply to run after %q: %v", data, err)
		}
		var rep reply
		if err := json.Unmarshal(line, &rep); err != nil || rep.RunID != j.RunID() {
			t.Fatalf("reply to run after %q: %s (%v), want run id %s", data, line, err, j.RunID())
		}
	})
}
