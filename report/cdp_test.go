package report_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// This file drives a headless Chromium over the DevTools protocol, for
// TestReportInABrowser: a minimal WebSocket client (RFC 6455: one
// upgrade, masked client frames, fragmented and control frames read)
// and the few protocol calls a test needs. Stdlib only.

// chromiumPath returns the Chromium to drive: $LOCKBENCH_CHROMIUM, else
// Debian's chromium on PATH or at /usr/bin/chromium; "" when none.
func chromiumPath() string {
	if p := os.Getenv("LOCKBENCH_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if _, err := os.Stat("/usr/bin/chromium"); err == nil {
		return "/usr/bin/chromium"
	}
	return ""
}

// browser is a running headless Chromium and a protocol connection to
// it.
type browser struct {
	cmd  *exec.Cmd
	conn *wsConn

	mu      sync.Mutex
	nextID  int
	pending map[int]chan cdpMessage
	events  []cdpMessage
	notify  chan struct{}
	readErr error
	done    chan struct{}
}

type cdpMessage struct {
	ID        int             `json:"id,omitempty"`
	Method    string          `json:"method,omitempty"`
	Params    json.RawMessage `json:"params,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
	SessionID string          `json:"sessionId,omitempty"`
	Error     *struct {
		Message string `json:"message"`
	} `json:"error,omitempty"`
}

// startBrowser starts Chromium headless with its own profile dir and a
// DevTools port chosen by the kernel, and connects to it. Cleanup
// closes the browser and kills its process group, so no renderer or
// zygote is left behind.
func startBrowser(t *testing.T, ctx context.Context, bin string) *browser {
	t.Helper()
	profile := t.TempDir()
	cmd := exec.Command(bin, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
		"--disable-component-update", "--disable-sync", "--no-first-run", "--no-default-browser-check",
		"--disable-extensions", "--disable-dev-shm-usage", "--hide-scrollbars", "--user-data-dir="+profile,
		"--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0", "about:blank")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	// Last resort, after the browser was asked to close (the cleanup
	// below runs first): kill what is left of its process group.
	t.Cleanup(func() {
		select {
		case <-exited:
		case <-time.After(10 * time.Second): // a bound on a clean exit, not a synchronisation
		}
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	})
	// Chromium prints its DevTools URL on stderr; the rest of stderr is
	// kept for the failure message.
	found := make(chan string, 1)
	var logMu sync.Mutex
	var log strings.Builder
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			logMu.Lock()
			log.WriteString(line + "\n")
			logMu.Unlock()
			if _, u, ok := strings.Cut(line, "DevTools listening on "); ok {
				select {
				case found <- strings.TrimSpace(u):
				default:
				}
			}
		}
	}()
	var wsURL string
	select {
	case wsURL = <-found:
	case <-exited:
		logMu.Lock()
		defer logMu.Unlock()
		t.Fatalf("chromium exited before it listened:\n%s", log.String())
	case <-ctx.Done():
		logMu.Lock()
		defer logMu.Unlock()
		t.Fatalf("chromium did not print its DevTools URL: %v\n%s", ctx.Err(), log.String())
	}
	conn, err := dialWS(ctx, wsURL)
	if err != nil {
		t.Fatalf("connect to %s: %v", wsURL, err)
	}
	b := &browser{cmd: cmd, conn: conn, pending: map[int]chan cdpMessage{}, notify: make(chan struct{}, 1), done: make(chan struct{})}
	go b.read()
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		b.call(cctx, "", "Browser.close", nil, nil) // best effort: the process group is killed anyway
		conn.Close()
		<-b.done
	})
	return b
}

// read dispatches replies to their callers and records every event.
func (b *browser) read() {
	defer close(b.done)
	for {
		data, err := b.conn.ReadMessage()
		if err != nil {
			b.mu.Lock()
			b.readErr = err
			for id, ch := range b.pending {
				close(ch)
				delete(b.pending, id)
			}
			b.mu.Unlock()
			return
		}
		var m cdpMessage
		if json.Unmarshal(data, &m) != nil {
			continue
		}
		b.mu.Lock()
		if m.ID != 0 {
			if ch, ok := b.pending[m.ID]; ok {
				ch <- m
				delete(b.pending, m.ID)
			}
		} else {
			b.events = append(b.events, m)
			select {
			case b.notify <- struct{}{}:
			default:
			}
		}
		b.mu.Unlock()
	}
}

// call sends a command (to a session when set) and decodes its result
// into out.
func (b *browser) call(ctx context.Context, session, method string, params, out any) error {
	b.mu.Lock()
	if b.readErr != nil {
		b.mu.Unlock()
		return b.readErr
	}
	b.nextID++
	id := b.nextID
	ch := make(chan cdpMessage, 1)
	b.pending[id] = ch
	b.mu.Unlock()
	msg := map[string]any{"id": id, "method": method}
	if params != nil {
		msg["params"] = params
	}
	if session != "" {
		msg["sessionId"] = session
	}
	data, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	if err := b.conn.WriteText(data); err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	select {
	case m, ok := <-ch:
		switch {
		case !ok:
			return fmt.Errorf("%s: connection closed", method)
		case m.Error != nil:
			return fmt.Errorf("%s: %s", method, m.Error.Message)
		case out != nil:
			return json.Unmarshal(m.Result, out)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%s: %w", method, ctx.Err())
	}
}

// waitEvent waits for an event of a session that match accepts.
func (b *browser) waitEvent(ctx context.Context, session, method string, from int) (int, error) {
	for {
		b.mu.Lock()
		for i := from; i < len(b.events); i++ {
			if e := b.events[i]; e.Method == method && e.SessionID == session {
				b.mu.Unlock()
				return i + 1, nil
			}
		}
		from = len(b.events)
		b.mu.Unlock()
		select {
		case <-b.notify:
		case <-ctx.Done():
			return from, fmt.Errorf("waiting for %s: %w", method, ctx.Err())
		}
	}
}

// recorded returns the events seen so far.
func (b *browser) recorded() []cdpMessage {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]cdpMessage(nil), b.events...)
}

// wsConn is the client end of a WebSocket.
type wsConn struct {
	c  net.Conn
	rd *bufio.Reader
	wm sync.Mutex
}

// dialWS opens a WebSocket to a ws:// URL. It sends no Origin header,
// which Chromium's DevTools server accepts without
// --remote-allow-origins.
func dialWS(ctx context.Context, raw string) (*wsConn, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, err
	}
	if u.Scheme != "ws" {
		return nil, fmt.Errorf("websocket: scheme %q: want ws", u.Scheme)
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", u.Host)
	if err != nil {
		return nil, err
	}
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	keyBytes := make([]byte, 16)
	rand.Read(keyBytes)
	key := base64.StdEncoding.EncodeToString(keyBytes)
	req := fmt.Sprintf("GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n", u.RequestURI(), u.Host, key)
	if _, err := io.WriteString(c, req); err != nil {
		c.Close()
		return nil, err
	}
	rd := bufio.NewReaderSize(c, 1<<16)
	resp, err := http.ReadResponse(rd, &http.Request{Method: http.MethodGet})
	if err != nil {
		c.Close()
		return nil, err
	}
	sum := sha1.Sum([]byte(key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
	if resp.StatusCode != http.StatusSwitchingProtocols || resp.Header.Get("Sec-WebSocket-Accept") != base64.StdEncoding.EncodeToString(sum[:]) {
		c.Close()
		return nil, fmt.Errorf("websocket: upgrade refused: %s", resp.Status)
	}
	c.SetDeadline(time.Time{})
	return &wsConn{c: c, rd: rd}, nil
}

// WriteText sends one masked text frame.
func (w *wsConn) WriteText(p []byte) error { return w.write(0x1, p) }

func (w *wsConn) write(op byte, p []byte) error {
	w.wm.Lock()
	defer w.wm.Unlock()
	hdr := []byte{0x80 | op}
	switch n := len(p); {
	case n < 126:
		hdr = append(hdr, 0x80|byte(n))
	case n <= 0xffff:
		hdr = append(hdr, 0x80|126, byte(n>>8), byte(n))
	default:
		hdr = binary.BigEndian.AppendUint64(append(hdr, 0x80|127), uint64(n))
	}
	var mask [4]byte
	rand.Read(mask[:])
	hdr = append(hdr, mask[:]...)
	body := make([]byte, len(p))
	for i := range p {
		body[i] = p[i] ^ mask[i%4]
	}
	_, err := w.c.Write(append(hdr, body...))
	return err
}

// ReadMessage returns the next data message, joining fragments and
// answering pings.
func (w *wsConn) ReadMessage() ([]byte, error) {
	var msg []byte
	for {
		var h [2]byte
		if _, err := io.ReadFull(w.rd, h[:]); err != nil {
			return nil, err
		}
		fin, op := h[0]&0x80 != 0, h[0]&0x0f
		n := uint64(h[1] & 0x7f)
		switch n {
		case 126:
			var b [2]byte
			if _, err := io.ReadFull(w.rd, b[:]); err != nil {
				return nil, err
			}
			n = uint64(binary.BigEndian.Uint16(b[:]))
		case 127:
			var b [8]byte
			if _, err := io.ReadFull(w.rd, b[:]); err != nil {
				return nil, err
			}
			n = binary.BigEndian.Uint64(b[:])
		}
		if n > 256<<20 {
			return nil, fmt.Errorf("websocket: frame of %d bytes", n)
		}
		var mask []byte
		if h[1]&0x80 != 0 {
			mask = make([]byte, 4)
			if _, err := io.ReadFull(w.rd, mask); err != nil {
				return nil, err
			}
		}
		p := make([]byte, n)
		if _, err := io.ReadFull(w.rd, p); err != nil {
			return nil, err
		}
		if mask != nil {
			for i := range p {
				p[i] ^= mask[i%4]
			}
		}
		switch op {
		case 0x8: // close
			return nil, io.EOF
		case 0x9: // ping
			if err := w.write(0xA, p); err != nil {
				return nil, err
			}
			continue
		case 0xA: // pong
			continue
		}
		msg = append(msg, p...)
		if fin {
			return msg, nil
		}
	}
}

// Close closes the connection.
func (w *wsConn) Close() error { return w.c.Close() }

// pageSession opens a new tab and attaches to it, with the domains the
// test listens to enabled and a fixed window size.
func (b *browser) pageSession(ctx context.Context, width, height int) (string, error) {
	var target struct {
		TargetID string `json:"targetId"`
	}
	if err := b.call(ctx, "", "Target.createTarget", map[string]any{"url": "about:blank"}, &target); err != nil {
		return "", err
	}
	var attached struct {
		SessionID string `json:"sessionId"`
	}
	if err := b.call(ctx, "", "Target.attachToTarget", map[string]any{"targetId": target.TargetID, "flatten": true}, &attached); err != nil {
		return "", err
	}
	s := attached.SessionID
	for _, m := range []string{"Runtime.enable", "Log.enable", "Network.enable", "Page.enable"} {
		if err := b.call(ctx, s, m, nil, nil); err != nil {
			return "", err
		}
	}
	err := b.call(ctx, s, "Emulation.setDeviceMetricsOverride", map[string]any{"width": width, "height": height, "deviceScaleFactor": 1, "mobile": false}, nil)
	return s, err
}

// screenshot saves a PNG of the page: the viewport, or the clip given.
func (b *browser) screenshot(ctx context.Context, session, path string, clip map[string]any) error {
	params := map[string]any{"format": "png"}
	if clip != nil {
		params["clip"] = clip
		params["captureBeyondViewport"] = true
	}
	var shot struct {
		Data string `json:"data"`
	}
	if err := b.call(ctx, session, "Page.captureScreenshot", params, &shot); err != nil {
		return err
	}
	png, err := base64.StdEncoding.DecodeString(shot.Data)
	if err != nil {
		return err
	}
	return os.WriteFile(path, png, 0o644)
}

// evaluate runs a JavaScript expression in the page and decodes its
// value (returned by value) into out.
func (b *browser) evaluate(ctx context.Context, session, expr string, out any) error {
	var r struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		ExceptionDetails *struct {
			Text string `json:"text"`
		} `json:"exceptionDetails"`
	}
	if err := b.call(ctx, session, "Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true}, &r); err != nil {
		return err
	}
	if r.ExceptionDetails != nil {
		return errors.New("evaluate: " + r.ExceptionDetails.Text)
	}
	return json.Unmarshal(r.Result.Value, out)
}

// artifactDir is where a test's screenshots go: t.ArtifactDir (kept
// under -artifacts), named in the log.
func artifactDir(t *testing.T) string {
	dir := t.ArtifactDir()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs(dir)
	t.Logf("screenshots in %s (kept when go test runs with -artifacts)", abs)
	return abs
}
