package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/lockbench/lockbench/backends"
)

// Probe reads what the PostgreSQL server at cfg.Addrs[0] holds for the
// keys whose names contain substr. In lease mode (the default) they are
// the rows of the lease table (the table param) whose key contains it;
// the live ones (expires_at after the server's now()) are Expiring, with
// the shortest remaining life by the server's clock. Advisory locks live
// in the server's memory under a hash of their key, so in advisory mode
// every advisory lock the server holds is counted, whatever its key.
func Probe(ctx context.Context, cfg backends.Config, substr string) (backends.Stored, error) {
	if err := cfg.NeedAddrs(1); err != nil {
		return backends.Stored{}, err
	}
	pc, err := poolConfig(cfg)
	if err != nil {
		return backends.Stored{}, err
	}
	conn, err := pgx.ConnectConfig(ctx, pc.ConnConfig)
	if err != nil {
		return backends.Stored{}, fmt.Errorf("probe %s: %w", cfg.Addrs[0], err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var s backends.Stored
	if Mode(cfg.String("mode", string(Lease))) == Advisory {
		rows, err := conn.Query(ctx, `SELECT classid::text || ':' || objid::text || ':' || objsubid::text, pid::text FROM pg_locks WHERE `+
			`locktype = 'advisory' AND granted`)
		if err != nil {
			return backends.Stored{}, fmt.Errorf("probe %s: advisory locks: %w", cfg.Addrs[0], err)
		}
		var lock, pid string
		_, err = pgx.ForEachRow(rows, []any{&lock, &pid}, func() error {
			s.Add(lock, "held by backend pid "+pid)
			return nil
		})
		if err != nil {
			return backends.Stored{}, fmt.Errorf("probe %s: advisory locks: %w", cfg.Addrs[0], err)
		}
		return s, nil
	}
	table := cfg.String("table", DefaultTable)
	if !identifier.MatchString(table) {
		return backends.Stored{}, fmt.Errorf("probe: table %q: want a lower-case identifier", table)
	}
	rows, err := conn.Query(ctx, `SELECT key, holder::text, token::text, CASE WHEN expires_at > now() THEN extract(epoch FROM expires_at - `+
		`now()) * 1000 ELSE -1 END
FROM `+table+` WHERE strpos(key, $1) > 0`, substr)
	if isUndefinedTable(err) {
		return backends.Stored{}, nil
	}
	if err != nil {
		return backends.Stored{}, fmt.Errorf("probe %s: %s: %w", cfg.Addrs[0], table, err)
	}
	var key, holder, token string
	var ms float64
	_, err = pgx.ForEachRow(rows, []any{&key, &holder, &token, &ms}, func() error {
		s.Add(key, holder+" token "+token)
		if ms > 0 {
			if ttl := time.Duration(ms * float64(time.Millisecond)); s.Expiring == 0 || ttl < s.TTL {
				s.TTL = ttl
			}
			s.Expiring++
		}
		return nil
	})
	if isUndefinedTable(err) {
		return backends.Stored{}, nil
	}
	if err != nil {
		return backends.Stored{}, fmt.Errorf("probe %s: %s: %w", cfg.Addrs[0], table, err)
	}
	return s, nil
}

// isUndefinedTable reports whether err is the server's "relation does not
// exist": no grant has created the table yet, or the server lost it.
func isUndefinedTable(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "42P01"
}
