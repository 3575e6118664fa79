package judge

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a judge's log that a test reads while the judge writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestToken: a judge with a run token serves the runners and clients that
// present it and refuses strangers — no token, a wrong one, a raw request —
// naming each refused peer in its log and never the token; the case of
// the run's own clients goes on undisturbed. Without a token it refuses to
// listen beyond loopback.
func TestToken(t *testing.T) {
	const token = "a-run-token-7f3a"
	var log syncBuffer
	j := served(t, Options{Token: token, Log: &log})
	ctx := context.Background()

	r, info := openRemote(t, j, "001", Token(token))

	for _, tc := range []struct {
		name string
		dial func() error
	}{
		{"runner without a token", func() error {
			r, err := DialRemote(ctx, j.Addr())
			if err == nil {
				r.Close()
			}
			return err
		}},
		{"client without a token", func() error {
			c, err := Dial(ctx, j.Addr(), "001", "stranger", info.FirstProcess, os.Getpid())
			if err == nil {
				c.Close()
			}
			return err
		}},
		{"client with a wrong token", func() error {
			c, err := Dial(ctx, j.Addr(), "001", "stranger", info.FirstProcess, os.Getpid(), Token("guessed"))
			if err == nil {
				c.Close()
			}
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.dial(); !errors.Is(err, ErrRefused) {
				t.Fatalf("%v, want ErrRefused", err)
			}
		})
	}
	// A raw grant report, with no hello: refused, and the connection
	// closed.
	conn, err := net.Dial("tcp", j.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte(`{"op":"grant","grant":{"key":"k"}}` + "\n")); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(conn).ReadString('\n')
	if !strings.Contains(line, `"refused":true`) {
		t.Errorf("a raw grant got %q", line)
	}
	_ = conn.SetReadDeadline(time.Now().Add(time.Minute))
	if _, err := conn.Read(make([]byte, 1)); err == nil {
		t.Error("the refused connection stays open")
	}

	got := log.String()
	if n := strings.Count(got, "judge: refused "); n != 4 {
		t.Errorf("the log names %d refusals, want 4:\n%s", n, got)
	}
	for _, want := range []string{"127.0.0.1:", `it said it is host "stranger"`, "no run token", "a wrong run token"} {
		if !strings.Contains(got, want) {
			t.Errorf("the log does not say %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, token) || strings.Contains(got, "guessed") {
		t.Errorf("the log shows a token:\n%s", got)
	}

	// The run's own client still joins and finishes the case.
	c, err := Dial(ctx, j.Addr(), "001", "control", info.FirstProcess, os.Getpid(), Token(token))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Done(ctx, Metrics{}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Finish(ctx, "control", "001"); err != nil {
		t.Fatal(err)
	}

	// Beyond loopback, a token or nothing.
	open, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	for _, addr := range []string{":0", "0.0.0.0:0"} {
		if err := open.Listen(addr); !errors.Is(err, ErrConfig) {
			t.Errorf("listen on %s without a token: %v, want ErrConfig", addr, err)
		}
	}
}
