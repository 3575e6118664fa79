package bench

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/lockbench/lockbench/history"
	"github.com/lockbench/lockbench/judge"
	"github.com/lockbench/lockbench/remote"
)

// hostJudge is a run's judge on the host the inventory gives the judge
// role: a lockbench judge daemon with a pidfile under the host's workers
// dir (so that the sweep of the next run kills it if this one lost the
// host), listening on the host's address and the role's port, taking
// reports only with the run's token.
type hostJudge struct {
	host *Host
	addr string // host:port, as every host and the control node reach it
	dir  string // its files on the host: pidfile, log, token, out dir
	proc remote.Proc
}

// out is the judge's run dir on its host.
func (j *hostJudge) out() string { return path.Join(j.dir, "judge") }

// judgeHost returns the host the inventory gives the judge role, or nil.
func (hs *Hosts) judgeHost() *Host {
	for _, h := range hs.hosts {
		if h != nil && h.cfg.Judge != nil {
			return h
		}
	}
	return nil
}

// JudgeStartTimeout bounds how long StartJudge waits for the judge on its
// host to listen.
const JudgeStartTimeout = 30 * time.Second

// StartJudge starts the run's judge on the host the inventory gives the
// judge role, and connects this runner to it: it makes the run's token,
// writes it to a file only root reads there (lockbench judge
// --token-file: never a command line or a log), starts lockbench judge
// as a daemon with a pidfile, and waits until it answers with the token.
// It returns nil, "" when the inventory puts the judge on no host (it
// then runs in this process). StopJudge stops it and brings its records
// back; Close kills it on every other way out.
func (hs *Hosts) StartJudge(ctx context.Context) (*judge.Remote, string, error) {
	h := hs.judgeHost()
	if h == nil {
		return nil, "", nil
	}
	b := make([]byte, 32)
	_, _ = crand.Read(b)
	token := hex.EncodeToString(b)
	id := make([]byte, 4)
	_, _ = crand.Read(id)
	runID := hex.EncodeToString(id)

	j := &hostJudge{host: h, addr: net.JoinHostPort(h.Addr.String(), strconv.Itoa(h.cfg.Judge.Port)), dir: path.Join(h.workersDir(), runID)}
	tokenFile := path.Join(j.dir, "judge-token")
	if err := remote.Upload(ctx, h.SSH, strings.NewReader(token+"\n"), tokenFile, 0o600); err != nil {
		return nil, "", fmt.Errorf("the judge on %s: its token: %w", h.Name, err)
	}
	d := remote.Daemon{Path: h.Binary, Args: []string{"judge", "--listen", j.addr, "--hosts", "1", "--run-id", runID,
		"--out", j.out(), "--token-file", tokenFile}, Pidfile: path.Join(j.dir, "judge.pid"), Log: path.Join(j.dir, "judge.log")}
	p, err := remote.Start(ctx, h.SSH, d)
	if err != nil {
		return nil, "", fmt.Errorf("the judge on %s: %w", h.Name, err)
	}
	j.proc = p
	hs.mu.Lock()
	hs.judge = j
	hs.mu.Unlock()
	fmt.Fprintf(hs.log, "lockbench: judge of run %s on %s, listening on %s\n", runID, h.Name, j.addr)

	wctx, cancel := context.WithTimeout(ctx, JudgeStartTimeout)
	defer cancel()
	for {
		r, err := judge.DialRemote(wctx, j.addr, judge.Token(token))
		if err == nil {
			// A runner that loses the judge's host stops talking to it at
			// once rather than dialing it until its calls time out.
			go func() {
				<-h.SSH.Done()
				r.Close()
			}()
			return r, token, nil
		}
		if errors.Is(err, judge.ErrRefused) {
			return nil, "", fmt.Errorf("the judge on %s: %w", h.Name, err)
		}
		if st, serr := p.State(wctx); serr == nil && st == remote.Gone {
			return nil, "", fmt.Errorf("the judge on %s exited: %s", h.Name, j.tail(ctx, 2048))
		}
		select {
		case <-wctx.Done():
			return nil, "", fmt.Errorf("the judge on %s does not answer at %s after %v: %w (its log: "+
				"%s)", h.Name, j.addr, JudgeStartTimeout, err, j.tail(ctx, 2048))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// tail is the end of the judge's log.
func (j *hostJudge) tail(ctx context.Context, n int) string {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	out, _ := remote.Output(ctx, j.host.SSH, "tail", "-c", strconv.Itoa(n), "--", path.Join(j.dir, "judge.log"))
	return strings.TrimSpace(string(out))
}

// fetchHistory brings the history of res, which the judge wrote on its
// host, into dir (at the same relative path) and reads it into res.Ops,
// as an in-process judge hands it: the runner's results (availability in
// the fault windows) read it. Without a judge on a host it does nothing.
func (hs *Hosts) fetchHistory(ctx context.Context, res *judge.Result, dir string) error {
	hs.mu.Lock()
	j := hs.judge
	hs.mu.Unlock()
	if j == nil || res.History == "" || dir == "" {
		return nil
	}
	local := filepath.Join(dir, filepath.FromSlash(res.History))
	if err := j.download(ctx, path.Join(j.out(), res.History), local); err != nil {
		return fmt.Errorf("the history of case %s from the judge on %s: %w", res.ID, j.host.Name, err)
	}
	ops, err := history.ReadFile(local)
	if err != nil {
		return fmt.Errorf("the history of case %s: %w", res.ID, err)
	}
	res.Ops = ops
	return nil
}

// download copies the file src on the judge's host to dst here.
func (j *hostJudge) download(ctx context.Context, src, dst string) error {
	var b bytes.Buffer
	if err := remote.Download(ctx, j.host.SSH, src, &b); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	return os.WriteFile(dst, b.Bytes(), 0o644)
}

// StopJudge stops the judge on its host (SIGTERM: it saves its results
// and exits) and brings back into dir/judge its own account of the run —
// its results.json, every case with the injections the nemesis told it —
// and its log, and into dir/history every history not brought back yet.
// Without a judge on a host (or without hosts) it does nothing.
func (hs *Hosts) StopJudge(ctx context.Context, dir string) error {
	if hs == nil {
		return nil
	}
	hs.mu.Lock()
	j := hs.judge
	hs.mu.Unlock()
	if j == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	if err := j.proc.Stop(ctx, 30*time.Second); err != nil {
		return fmt.Errorf("stopping the judge on %s: %w", j.host.Name, err)
	}
	if dir == "" {
		return nil
	}
	var errs []error
	for src, dst := range map[string]string{
		path.Join(j.out(), "results.json"): filepath.Join(dir, "judge", "results.json"),
		path.Join(j.dir, "judge.log"):      filepath.Join(dir, "judge", "judge.log"),
	} {
		if err := j.download(ctx, src, dst); err != nil {
			errs = append(errs, fmt.Errorf("%s from the judge on %s: %w", path.Base(src), j.host.Name, err))
		}
	}
	out, err := remote.Output(ctx, j.host.SSH, "sh", "-c", `cd -- "$1" 2>/dev/null && for f in *; do [ -f "$f" ] && echo "$f"; done; true`,
		"sh", path.Join(j.out(), "history"))
	if err != nil {
		errs = append(errs, err)
	}
	for _, f := range strings.Fields(string(out)) {
		dst := filepath.Join(dir, "history", f)
		if _, err := os.Stat(dst); err == nil {
			continue
		}
		if err := j.download(ctx, path.Join(j.out(), "history", f), dst); err != nil {
			errs = append(errs, fmt.Errorf("history %s from the judge on %s: %w", f, j.host.Name, err))
		}
	}
	return errors.Join(errs...)
}

// judgeLeftOn says where the judge a run started on h, whose link broke,
// may still run, or "".
func (hs *Hosts) judgeLeftOn(h *Host) string {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if hs.judge == nil || hs.judge.host != h {
		return ""
	}
	return fmt.Sprintf("the judge (pidfile %s)", hs.judge.proc.Pidfile)
}

// untilJudgeLost returns a context that does not end with ctx but when
// the link to the judge's host breaks: what a runner still says to a
// judge on a host once its run is cut short (stop the case, take its
// result, record the injections) must not wait for TCP to give up on a
// host it lost. Without a judge on a host it ends only with cancel.
func (hs *Hosts) untilJudgeLost(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	hs.mu.Lock()
	j := hs.judge
	hs.mu.Unlock()
	if j == nil {
		return ctx, func() { cancel(nil) }
	}
	go func() {
		select {
		case <-j.host.SSH.Done():
			cancel(fmt.Errorf("the link to the judge's host %s broke", j.host.Name))
		case <-ctx.Done():
		}
	}()
	return ctx, func() { cancel(nil) }
}
