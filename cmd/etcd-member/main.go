// Command etcd-member runs one etcd member on go.etcd.io/etcd/server/v3/embed.
//
// compose starts one process per member, so that each can be killed,
// paused or restarted on its own without downloading an etcd release. It
// exits 0 on SIGTERM or SIGINT after closing the member, and non-zero when
// the member fails to start or fails while serving.
package main

import (
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "etcd-member:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("etcd-member", flag.ContinueOnError)
	name := fs.String("name", "default", "member name, as in --initial-cluster")
	dataDir := fs.String("data-dir", "", "data dir (required)")
	clientURL := fs.String("listen-client-url", "http://127.0.0.1:2379", "client URL to listen on and advertise")
	peerURL := fs.String("listen-peer-url", "http://127.0.0.1:2380", "peer URL to listen on and advertise")
	cluster := fs.String("initial-cluster", "", "name=peerURL,... of every initial member (default: this member alone)")
	state := fs.String("initial-cluster-state", embed.ClusterStateFlagNew, "new or existing")
	token := fs.String("initial-cluster-token", "lockbench", "token that keeps clusters apart")
	heartbeat := fs.Uint("heartbeat-interval", 50, "heartbeat interval in ms")
	election := fs.Uint("election-timeout", 300, "election timeout in ms")
	logLevel := fs.String("log-level", "warn", "debug, info, warn or error")
	noFsync := fs.Bool("unsafe-no-fsync", false, "skip fsync (faster, loses data on a machine crash)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *dataDir == "" {
		return fmt.Errorf("--data-dir is required")
	}
	if *state != embed.ClusterStateFlagNew && *state != embed.ClusterStateFlagExisting {
		return fmt.Errorf("--initial-cluster-state %q: want new or existing", *state)
	}
	curl, err := url.Parse(*clientURL)
	if err != nil {
		return fmt.Errorf("--listen-client-url %q: %w", *clientURL, err)
	}
	purl, err := url.Parse(*peerURL)
	if err != nil {
		return fmt.Errorf("--listen-peer-url %q: %w", *peerURL, err)
	}

	cfg := embed.NewConfig()
	cfg.Name = *name
	cfg.Dir = *dataDir
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*curl}, []url.URL{*curl}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*purl}, []url.URL{*purl}
	cfg.InitialCluster = *cluster
	if cfg.InitialCluster == "" {
		cfg.InitialCluster = cfg.InitialClusterFromName(*name)
	}
	cfg.ClusterState = *state
	cfg.InitialClusterToken = *token
	cfg.TickMs, cfg.ElectionMs = *heartbeat, *election
	cfg.LogLevel = *logLevel
	cfg.UnsafeNoFsync = *noFsync

	// Before the member starts: it answers clients before StartEtcd
	// returns, and a SIGTERM then must still close it cleanly.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return fmt.Errorf("start %s: %w", *name, err)
	}
	defer e.Close()

	select {
	case <-e.Server.ReadyNotify():
		fmt.Fprintf(os.Stderr, "etcd-member: %s ready at %s %s\n", *name, time.Now().Format(time.RFC3339Nano), *clientURL)
	case err := <-e.Err():
		return fmt.Errorf("%s failed before it was ready: %w", *name, err)
	case sig := <-sigs:
		return fmt.Errorf("%s: %v before it was ready", *name, sig)
	}
	select {
	case err := <-e.Err():
		return fmt.Errorf("%s: %w", *name, err)
	case <-sigs:
		return nil
	}
}
