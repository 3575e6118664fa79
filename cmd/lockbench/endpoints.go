package main

import (
	"crypto/tls"
	"fmt"
	"os"

	"github.com/spf13/pflag"

	"github.com/lockbench/lockbench/backends"
)

// endpointFlags point backends at servers lockbench does not start: your
// own cluster, with its credentials and TLS. A backend given endpoints
// runs against them; faults that need to break servers are then skipped
// for it.
type endpointFlags struct {
	redis, redlock, redsync, sentinel, zookeeper, etcd []string
	rueidislock, postgres                              []string
	sentinelMaster                                     string
	redisTLS, etcdTLS, pgTLS                           tlsFlags
	redisUser, redisPassword                           string
	etcdUser, etcdPassword                             string
	zkUser, zkPassword                                 string
	pgUser, pgPassword                                 string
}

type tlsFlags struct {
	ca, cert, key string
	insecure      bool
}

// register adds the --<prefix>-tls-* flags of one kind of server: name
// is what the help calls it, servers what the CA verifies.
func (t *tlsFlags) register(fl *pflag.FlagSet, prefix, name, servers string) {
	fl.StringVar(&t.ca, prefix+"-tls-ca", "", "CA certificate (PEM) to verify "+servers+"; turns TLS on")
	fl.StringVar(&t.cert, prefix+"-tls-cert", "", "client certificate (PEM) for "+name+"; turns TLS on")
	fl.StringVar(&t.key, prefix+"-tls-key", "", "client key (PEM) for "+name)
	fl.BoolVar(&t.insecure, prefix+"-tls-insecure", false, "use TLS to "+name+" without verifying the server")
}

func (e *endpointFlags) register(fl *pflag.FlagSet) {
	fl.StringSliceVar(&e.redis, "redis-addrs", nil, "the single Redis server of the redis backend (host:port)")
	fl.StringSliceVar(&e.redlock, "redlock-addrs", nil, "the independent Redis masters of redlock (and of redsync, unless --redsync-addrs)")
	fl.StringSliceVar(&e.redsync, "redsync-addrs", nil, "the Redis masters of redsync")
	fl.StringSliceVar(&e.rueidislock, "rueidislock-addrs", nil, "the single Redis server of rueidislock (default: --redis-addrs)")
	fl.StringSliceVar(&e.sentinel, "sentinel-addrs", nil, "the sentinels of the sentinel backend")
	fl.StringVar(&e.sentinelMaster, "sentinel-master", "", "the master name the sentinels monitor")
	fl.StringSliceVar(&e.zookeeper, "zookeeper-addrs", nil, "the ZooKeeper ensemble (host:port of each server)")
	fl.StringSliceVar(&e.etcd, "etcd-addrs", nil, "the etcd endpoints")
	fl.StringVar(&e.redisUser, "redis-username", "", "Redis ACL user (redis, redlock, redsync, sentinel)")
	fl.StringVar(&e.redisPassword, "redis-password", os.Getenv("LOCKBENCH_REDIS_PASSWORD"), "Redis password (default $LOCKBENCH_REDIS_PASSWORD)")
	e.redisTLS.register(fl, "redis", "Redis", "Redis servers")
	fl.StringVar(&e.etcdUser, "etcd-username", "", "etcd user")
	fl.StringVar(&e.etcdPassword, "etcd-password", os.Getenv("LOCKBENCH_ETCD_PASSWORD"), "etcd password (default $LOCKBENCH_ETCD_PASSWORD)")
	e.etcdTLS.register(fl, "etcd", "etcd", "etcd")
	fl.StringVar(&e.zkUser, "zookeeper-username", "", "ZooKeeper digest auth user")
	fl.StringVar(&e.zkPassword, "zookeeper-password", os.Getenv("LOCKBENCH_ZOOKEEPER_PASSWORD"), "ZooKeeper digest auth password (default $LOCKBENCH_ZOOKEEPER_PASSWORD)")
	fl.StringSliceVar(&e.postgres, "postgres-addrs", nil, "the PostgreSQL server of the postgres backend (host:port, or a postgres:// URL)")
	fl.StringVar(&e.pgUser, "postgres-username", "", "PostgreSQL user (default postgres)")
	fl.StringVar(&e.pgPassword, "postgres-password", os.Getenv("LOCKBENCH_POSTGRES_PASSWORD"), "PostgreSQL password (default $LOCKBENCH_POSTGRES_PASSWORD)")
	e.pgTLS.register(fl, "postgres", "PostgreSQL", "the PostgreSQL server")
}

// configs returns the external endpoints by backend name.
func (e *endpointFlags) configs() (map[string]backends.Config, error) {
	redisFiles, redisTLS, err := e.redisTLS.files()
	if err != nil {
		return nil, fmt.Errorf("redis TLS: %w", err)
	}
	etcdFiles, etcdTLS, err := e.etcdTLS.files()
	if err != nil {
		return nil, fmt.Errorf("etcd TLS: %w", err)
	}
	pgFiles, pgTLS, err := e.pgTLS.files()
	if err != nil {
		return nil, fmt.Errorf("postgres TLS: %w", err)
	}
	redis := func(addrs []string) backends.Config {
		return backends.Config{Addrs: addrs, Username: e.redisUser, Password: e.redisPassword, TLS: redisTLS, TLSFiles: redisFiles}
	}
	out := map[string]backends.Config{}
	if len(e.redis) > 0 {
		out["redis"] = redis(e.redis)
		out["rueidislock"] = redis(e.redis)
	}
	if len(e.rueidislock) > 0 {
		out["rueidislock"] = redis(e.rueidislock)
	}
	if len(e.redlock) > 0 {
		out["redlock"] = redis(e.redlock)
		out["redsync"] = redis(e.redlock)
	}
	if len(e.redsync) > 0 {
		out["redsync"] = redis(e.redsync)
	}
	if len(e.sentinel) > 0 {
		c := redis(e.sentinel)
		if e.sentinelMaster != "" {
			c.Params = map[string]string{"master": e.sentinelMaster}
		}
		out["sentinel"] = c
	}
	if len(e.zookeeper) > 0 {
		out["zookeeper"] = backends.Config{Addrs: e.zookeeper, Username: e.zkUser, Password: e.zkPassword}
	}
	if len(e.etcd) > 0 {
		out["etcd"] = backends.Config{Addrs: e.etcd, Username: e.etcdUser, Password: e.etcdPassword, TLS: etcdTLS, TLSFiles: etcdFiles}
	}
	if len(e.postgres) > 0 {
		out["postgres"] = backends.Config{Addrs: e.postgres, Username: e.pgUser, Password: e.pgPassword, TLS: pgTLS, TLSFiles: pgFiles}
	}
	return out, nil
}

// files returns the TLS files the flags name, or nil when they ask for
// no TLS. The configuration is loaded once here, so that a bad file fails
// the run before any case.
func (t tlsFlags) files() (*backends.TLSFiles, *tls.Config, error) {
	f := backends.TLSFiles{CA: t.ca, Cert: t.cert, Key: t.key, Insecure: t.insecure}
	c, err := f.Load()
	if c == nil || err != nil {
		return nil, nil, err
	}
	return &f, c, nil
}
