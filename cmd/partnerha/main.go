// Command partnerha runs the service on a high-availability PostgreSQL and
// fails the primary under load: etcd, a 3-node Patroni cluster with
// synchronous_mode_strict and HAProxy checking Patroni's /primary, two
// `partnerapi serve` replicas on a multi-host DATABASE_URL with
// target_session_attrs=read-write and one through HAProxy, 6 clients at
// about 200 requests a second (keyed contact and lead creates, reads, a
// sync walk, token issue and revoke), and in turn a planned switchover, a
// crash of the primary's node, a 30 s freeze of the primary and a 30 s
// partition of the primary from its standbys.
//
// After each failover it checks the promises of product.md "High
// availability" and prints them as a table: every answer 2xx, 503 or 429
// within 5 s; no acknowledged create lost and none applied twice after its
// keyed retries; the replicas serve again without a restart; a token
// revoked on one replica is refused by the others within 1 s of the new
// primary taking over; a sync cursor from before the failover serves every
// later create or answers 410. It exits non-zero when one is broken.
//
//	make test-ha            (installs patroni, etcd-server, haproxy; builds)
//	go run ./cmd/partnerha -bin bin/partnerapi -keep
//
// It runs as root (Patroni runs as postgres through setpriv) and needs no
// network: every process listens on a free port on 127.0.0.1, under one
// temporary directory, and is killed when it exits, failed or not.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "partnerha:", err)
		os.Exit(1)
	}
}

type config struct {
	bin     string
	workers int
	rate    float64
	hold    time.Duration
	keep    bool
	only    string
	timing  timing
}

func run() (err error) {
	var c config
	flag.StringVar(&c.bin, "bin", "bin/partnerapi", "the partnerapi binary (make build)")
	flag.IntVar(&c.workers, "workers", 6, "concurrent clients (one of them walks the sync feed)")
	flag.Float64Var(&c.rate, "rate", 200, "requests a second, all clients together")
	flag.DurationVar(&c.hold, "hold", 30*time.Second, "how long the freeze and the partition last")
	flag.BoolVar(&c.keep, "keep", false, "keep the directory (logs of etcd, Patroni, PostgreSQL, HAProxy and the replicas)")
	flag.StringVar(&c.only, "only", "", "run only this failover (switchover, crash, freeze, partition)")
	flag.IntVar(&c.timing.TTL, "ttl", 20, "Patroni's ttl: seconds the leader key lives")
	flag.IntVar(&c.timing.LoopWait, "loop-wait", 5, "Patroni's loop_wait: seconds between HA loops")
	flag.IntVar(&c.timing.RetryTimeout, "retry-timeout", 5, "Patroni's retry_timeout: seconds etcd and PostgreSQL calls are retried")
	flag.Parse()
	if _, err := os.Stat(c.bin); err != nil {
		return fmt.Errorf("%s: %w (run `make build`)", c.bin, err)
	}
	bin, err := filepath.Abs(c.bin)
	if err != nil {
		return err
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	dir, err := os.MkdirTemp("", "partnerha-")
	if err != nil {
		return err
	}
	_ = os.Chmod(dir, 0o755)
	defer func() {
		if c.keep || err != nil {
			fmt.Println("logs (etcd, Patroni, PostgreSQL, HAProxy, replicas) kept in", dir)
			return
		}
		_ = os.RemoveAll(dir)
	}()
	began := time.Now()
	fmt.Printf("starting etcd, 3 Patroni nodes (synchronous_mode_strict; ttl %d, loop_wait %d, retry_timeout %d) and HAProxy …\n",
		c.timing.TTL, c.timing.LoopWait, c.timing.RetryTimeout)
	cl, err := startCluster(ctx, dir, c.timing)
	// Whatever happens from here on, every process started is ended.
	defer cl.close()
	if err != nil {
		return fmt.Errorf("start cluster: %w", err)
	}
	fmt.Printf("  cluster whole after %v; leader %s\n", time.Since(began).Round(time.Second), cl.leader().name)

	replicas := []*replica{
		{name: "A", dbURL: cl.multiHostURL()},
		{name: "B", dbURL: cl.multiHostURL()},
		{name: "C", dbURL: cl.haproxyURL()},
	}
	for _, r := range replicas {
		// A first: it migrates; the others find the schema in place.
		if err := r.start(bin, logPath(dir, "replica-"+r.name)); err != nil {
			return err
		}
		defer r.kill()
		if r.gone() {
			return fmt.Errorf("replica %s exited at start (see %s)", r.name, logPath(dir, "replica-"+r.name))
		}
	}
	fmt.Println("  replicas A and B on", redact(cl.multiHostURL()))
	fmt.Println("  replica C on", redact(cl.haproxyURL()))
	tn, err := fixtures(ctx, replicas[0])
	if err != nil {
		return err
	}
	l := &load{replicas: replicas, tenant: tn}
	stopLoad := l.start(c.workers, c.rate)
	stopped := false
	defer func() {
		if !stopped {
			stopLoad()
		}
	}()

	h := &harness{cl: cl, l: l, replicas: replicas, hold: c.hold, ctx: ctx, windowStart: time.Now()}
	var results []*result
	for _, f := range failovers {
		if c.only != "" && f.name != c.only {
			continue
		}
		if ctx.Err() != nil {
			break
		}
		res, err := h.run(f)
		if ctx.Err() != nil {
			return fmt.Errorf("interrupted during the %s", f.name)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", f.name, err)
		}
		results = append(results, res)
	}
	stopLoad()
	stopped = true
	failed := report(results, l)
	fmt.Printf("\nwhole run: %v\n", time.Since(began).Round(time.Second))
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if failed {
		return errors.New("a promise was broken (see above)")
	}
	return nil
}

func freeAddr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// secret is a random password for the cluster's roles.
func secret() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
