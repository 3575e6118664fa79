package postgres

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/lockbench/lockbench/locker"
)

// statements are the Lease mode's SQL on its table. now() is the time
// the statement's transaction began on the server: expiry is by the
// server's clock.
type statements struct {
	// create makes the table: one row per key ever granted. A released
	// row keeps its token and expires at -infinity.
	create string
	// grant takes key for holder $2 for $3 if its row is free or expired
	// (or new), incrementing its token, and returns the token; no row when
	// the key is held.
	grant string
	// extend moves the expiry of a row still held by $2 to now + $3.
	extend string
	// release frees a row still held by $2.
	release string
	// Each may run twice (see retryStale): the grant's holder is drawn
	// anew for every attempt of an Acquire but not for a retry, and a
	// grant to the same holder, like a release of a row it already
	// released, succeeds again.
}

func leaseStatements(table string) statements {
	return statements{
		create: `CREATE TABLE IF NOT EXISTS ` + table + ` (
	key text PRIMARY KEY,
	holder uuid NOT NULL,
	token bigint NOT NULL,
	expires_at timestamptz NOT NULL)`,
		grant: `INSERT INTO ` + table + ` AS l (key, holder, token, expires_at) VALUES ($1, $2, 1, now() + $3::interval)
ON CONFLICT (key) DO UPDATE SET holder = excluded.holder, token = l.token + 1, expires_at = excluded.expires_at
	WHERE l.expires_at <= now() OR l.holder = excluded.holder
RETURNING token`,
		extend: `UPDATE ` + table + ` SET expires_at = now() + $3::interval WHERE key = $1 AND holder = $2 AND expires_at > now()`,
		release: `UPDATE ` + table + ` SET expires_at = '-infinity' WHERE key = $1 AND holder = $2 AND (expires_at > now() OR ` +
			`expires_at = '-infinity')`,
	}
}

// grantRow runs the grant statement for key once.
func (l *Locker) grantRow(ctx context.Context, key string, o locker.Options) (locker.Lease, error) {
	var holder [16]byte
	_, _ = rand.Read(holder[:])
	start := time.Now()
	var token int64
	err := l.withTable(ctx, func(ctx context.Context) error {
		return retryStale(ctx, func(ctx context.Context) error {
			return l.pool.QueryRow(ctx, l.sql.grant, key, holder, o.TTL).Scan(&token)
		})
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("%w: %q is held", locker.ErrNotAcquired, key)
	}
	if err != nil {
		return nil, l.failed(ctx, key, err)
	}
	g := locker.Grant{Key: key, Token: uint64(token), HasToken: true, ValidUntil: start.Add(o.TTL - drift(o.TTL))}
	return locker.NewLease(l.closing.Context(), &row{l: l, key: key, holder: holder}, g, o), nil
}

// withTable runs op, and once more after creating the table if the
// server says it does not exist: on first use, or after the server
// restarted without its data.
func (l *Locker) withTable(ctx context.Context, op func(context.Context) error) error {
	err := op(ctx)
	if !isUndefinedTable(err) {
		return err
	}
	if err := l.createTable(ctx); err != nil {
		return err
	}
	return op(ctx)
}

// createTable creates the table, one Locker at a time (concurrent CREATE
// TABLE IF NOT EXISTS statements can collide): under a transaction-scoped
// advisory lock on the table's name.
func (l *Locker) createTable(ctx context.Context) error {
	l.schema.Lock()
	defer l.schema.Unlock()
	return pgx.BeginFunc(ctx, l.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", keyID("lockbench table "+l.table)); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, l.sql.create)
		return err
	})
}

// row is the Lease mode's side of a lease: its key and the random holder
// id its grant wrote.
type row struct {
	l      *Locker
	key    string
	holder [16]byte
}

var _ locker.Holder = (*row)(nil)

// Extend implements locker.Holder.
func (r *row) Extend(ctx context.Context, ttl time.Duration) (time.Time, error) {
	start := time.Now()
	if err := r.update(ctx, r.l.sql.extend, ttl); err != nil {
		return time.Time{}, err
	}
	return start.Add(ttl - drift(ttl)), nil
}

// Release implements locker.Holder.
func (r *row) Release(ctx context.Context) error {
	return r.update(ctx, r.l.sql.release)
}

// update runs an extend or release statement on the row, which must
// still be ours and unexpired.
func (r *row) update(ctx context.Context, sql string, args ...any) error {
	var tag pgconn.CommandTag
	err := r.l.withTable(ctx, func(ctx context.Context) error {
		return retryStale(ctx, func(ctx context.Context) (err error) {
			tag, err = r.l.pool.Exec(ctx, sql, append([]any{r.key, r.holder}, args...)...)
			return err
		})
	})
	if err != nil {
		return r.l.nodeError(err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%w: %q: its row expired or has another holder", locker.ErrNotHeld, r.key)
	}
	return nil
}
