package redis

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/lockbench/lockbench/backends"
)

// Probe reads what the Redis server at cfg.Addrs[0] holds for the keys
// whose names contain substr, by SCAN and PTTL: every backend on
// standalone Redis keeps a lock as a key named after it (with a prefix of
// its own, or none) and its counters and queues under names that contain
// it, so one probe serves them all.
func Probe(ctx context.Context, cfg backends.Config, substr string) (backends.Stored, error) {
	if err := cfg.NeedAddrs(1); err != nil {
		return backends.Stored{}, err
	}
	c := goredis.NewClient(&goredis.Options{Addr: cfg.Addrs[0], Username: cfg.Username, Password: cfg.Password, TLSConfig: cfg.TLS,
		MaxRetries: -1, PoolSize: 1, DialTimeout: time.Second})
	defer c.Close()
	var s backends.Stored
	match := "*" + globEscape(substr) + "*"
	iter := c.Scan(ctx, 0, match, 1000).Iterator()
	for iter.Next(ctx) {
		key := iter.Val()
		pipe := c.Pipeline()
		pttl, dump := pipe.PTTL(ctx, key), pipe.Dump(ctx, key)
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, goredis.Nil) {
			return backends.Stored{}, fmt.Errorf("probe %s: PTTL and DUMP %q: %w", cfg.Addrs[0], key, err)
		}
		ttl := pttl.Val()
		if ttl == -2 || dump.Err() != nil { // gone between SCAN and PTTL
			continue
		}
		if ttl >= 0 {
			if s.Expiring == 0 || ttl < s.TTL {
				s.TTL = ttl
			}
			s.Expiring++
		}
		sum := sha256.Sum256([]byte(dump.Val()))
		s.Add(key, hex.EncodeToString(sum[:8]))
	}
	if err := iter.Err(); err != nil {
		return backends.Stored{}, fmt.Errorf("probe %s: SCAN: %w", cfg.Addrs[0], err)
	}
	return s, nil
}

// globEscape escapes the characters SCAN's MATCH pattern gives a meaning.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\^`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
