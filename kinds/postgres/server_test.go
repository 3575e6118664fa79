package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/lockbench/lockbench/compose"
	"github.com/lockbench/lockbench/compose/composetest"
	"github.com/lockbench/lockbench/kinds/postgres"
)

// pgQuery runs one statement on a new connection within 3 s.
func pgQuery(ctx context.Context, addr, sql string, dst ...any) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, postgres.URL(addr))
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	if len(dst) == 0 {
		_, err = c.Exec(ctx, sql)
		return err
	}
	return c.QueryRow(ctx, sql).Scan(dst...)
}

// procState returns the state letter of process pid ("" if it is gone).
func procState(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return f[0]
}

func TestPostgresKillRestartPause(t *testing.T) {
	t.Parallel()
	composetest.StartsServersWithin(t, 4*time.Minute) // 74 s on a 2-core machine loaded about 10×
	ctx := context.Background()
	env := composetest.ForTest(t)
	n, err := postgres.StartServer(ctx, env, compose.Spec{}, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", n.PID()))
		if err != nil || strings.Contains(string(st), "\nUid:\t0\t") {
			t.Fatalf("run as root, the server must run as %s: %v\n%s", postgres.DefaultPrograms().User, err, st)
		}
	}
	var fsync string
	if err := pgQuery(ctx, n.Addr(), "SHOW fsync", &fsync); err != nil || fsync != "on" {
		t.Fatalf("SHOW fsync = %q, %v; the durable profile is the default", fsync, err)
	}
	if err := pgQuery(ctx, n.Addr(), "CREATE TABLE kept (v int); INSERT INTO kept VALUES (42)"); err != nil {
		t.Fatal(err)
	}
	kids := composetest.Children(n.PID())
	if len(kids) == 0 {
		t.Fatal("the postmaster has no children")
	}

	// Pause stops every process of the server, not only its group.
	if err := n.Pause(); err != nil {
		t.Fatal(err)
	}
	for _, p := range append(kids, n.PID()) {
		// A session that was closing may have ended meanwhile.
		if s := procState(p); s != "T" && s != "" && s != "Z" {
			t.Errorf("process %d is in state %q while the server is paused, want T", p, s)
		}
	}
	if err := pgQuery(ctx, n.Addr(), "SELECT 1"); err == nil {
		t.Fatal("a paused server answered")
	}
	if err := n.Resume(); err != nil {
		t.Fatal(err)
	}
	var v int
	if err := pgQuery(ctx, n.Addr(), "SELECT v FROM kept", &v); err != nil || v != 42 {
		t.Fatalf("after Resume: %d, %v", v, err)
	}

	// Kill: a crash; nothing of the server is left.
	c, err := pgx.Connect(ctx, postgres.URL(n.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	pid := n.PID()
	kids = composetest.Children(pid)
	if err := n.Kill(); err != nil {
		t.Fatal(err)
	}
	for _, p := range append(kids, pid) {
		if composetest.ProcessAlive(p) {
			t.Errorf("process %d of the server survived Kill", p)
		}
	}
	if err := c.Ping(ctx); err == nil {
		t.Fatal("a session survived its server's death")
	}

	// A restart with the data recovers what was committed.
	if err := n.Restart(ctx, true); err != nil {
		t.Fatal(err)
	}
	if err := pgQuery(ctx, n.Addr(), "SELECT v FROM kept", &v); err != nil || v != 42 {
		t.Fatalf("after a restart with data: %d, %v", v, err)
	}
	// Without: a new, empty cluster.
	if err := n.Restart(ctx, false); err != nil {
		t.Fatal(err)
	}
	err = pgQuery(ctx, n.Addr(), "SELECT v FROM kept", &v)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "42P01" {
		t.Fatalf("after a restart without data: %v, want undefined_table", err)
	}
	dir := n.Dir
	if err := env.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the server's dir %s outlived its Env: %v", dir, err)
	}
}

func TestPostgresFastProfileProxied(t *testing.T) {
	t.Parallel()
	composetest.StartsServersWithin(t, 2*time.Minute) // 24 s on a 2-core machine loaded about 10×
	ctx := context.Background()
	env := composetest.ForTest(t)
	n, err := postgres.StartServer(ctx, env, compose.Spec{Durability: compose.DurabilityFast, Proxied: true},
		postgres.Options{Config: [][2]string{{"application_name", "compose-test"}}})
	if err != nil {
		t.Fatal(err)
	}
	if n.Addr() == n.ServerAddr() {
		t.Fatal("a proxied server's Addr is its own")
	}
	for setting, want := range map[string]string{"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off", "application_name": "compose-test"} {
		var got string
		if err := pgQuery(ctx, n.Addr(), "SHOW "+setting, &got); err != nil || got != want {
			t.Errorf("SHOW %s = %q, %v; want %q", setting, got, err, want)
		}
	}
	if err := n.Partition(); err != nil {
		t.Fatal(err)
	}
	err = pgQuery(ctx, n.Addr(), "SELECT 1")
	if !errors.Is(err, context.DeadlineExceeded) && !pgconn.Timeout(err) {
		t.Fatalf("a query across a partition = %v, want a timeout", err)
	}
	if err := pgQuery(ctx, n.ServerAddr(), "SELECT 1"); err != nil {
		t.Fatalf("the server itself should still answer: %v", err)
	}
	if err := n.Heal(); err != nil {
		t.Fatal(err)
	}
	if err := pgQuery(ctx, n.Addr(), "SELECT 1"); err != nil {
		t.Fatalf("after Heal: %v", err)
	}
}
