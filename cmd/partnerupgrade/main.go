// Command partnerupgrade is the rolling-upgrade and rollback test (make
// test-upgrade). An operator upgrades replica by replica on one database,
// and rolls back by starting the previous release again on the migrated
// database; every partner request must be served through both, so it runs
// exactly that under a load of every kind of request:
//
//	old        the previous release (PREVIOUS_RELEASE) alone; it migrated the empty database
//	migrate    the current build's `partnerapi migrate` while the previous release serves
//	old+new    a current replica beside the previous one
//	new        the previous one stopped (SIGTERM): the current serves alone
//	rollback   the previous release started again on the migrated database, beside the current
//	old-again  the current stopped: the previous release serves alone
//	reupgrade  a current replica again beside it (its start-up must re-apply nothing harmful)
//	new-again  the previous one stopped
//	sealed     `partnerapi migrate --seal-webhook-secrets`: no plaintext webhook secret kept for the previous release
//
// The load runs from the first phase to the last, spread over the replicas
// in the rotation: token requests, keyed lead creates with an inline
// contact (alone, and eight at once so that the server groups them),
// keyed lead batches and contact creates, patches and deletes of records
// it created, keyed replays of earlier creates, paged lists, a sync walk,
// a walk of the events feed, and the webhook deliveries of an endpoint
// pointing at a receiver in this process. A replica leaves the rotation,
// and its requests in flight end, before it gets SIGTERM.
//
// It fails when a request that was well formed got anything but 2xx (a
// 5xx, a refused connection, a 429: the rate limits are configured away),
// when an acknowledged create, patch or delete is not what the API shows
// afterwards, when the sync walk or the events feed missed one, when a
// webhook of an acknowledged create never arrived, or when a replica does
// not start, does not stop cleanly or exits by itself. -sabotage drops a
// function the previous release calls right after the migration, as a
// careless migration would, to show that the test then fails.
//
//	make test-upgrade                              (builds bin/partnerapi first)
//	go run ./cmd/partnerupgrade -bin bin/partnerapi -phase 5s -sabotage
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/svat/partnerapi/db/release"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "partnerupgrade:", err)
		os.Exit(1)
	}
}

// config is the command line.
type config struct {
	bin       string
	prevBin   string
	previous  string
	phase     time.Duration
	workers   int
	rate      float64
	hookWait  time.Duration
	sabotage  bool
	reupgrade bool
	keep      bool
}

func run() (err error) {
	var c config
	flag.StringVar(&c.bin, "bin", "bin/partnerapi", "the current build (make build)")
	flag.StringVar(&c.prevBin, "prev-bin", "", "a build of the previous release to use instead of building it from PREVIOUS_RELEASE")
	flag.StringVar(&c.previous, "previous", "", "the file naming the previous release (default: PREVIOUS_RELEASE at the repository's root)")
	flag.DurationVar(&c.phase, "phase", 5*time.Second, "how long each phase serves under load once its replicas are up")
	flag.IntVar(&c.workers, "workers", 4, "clients sending the mixed requests (besides the grouped creates and the two feed walkers)")
	flag.Float64Var(&c.rate, "rate", 120, "mixed requests a second, all those clients together")
	flag.DurationVar(&c.hookWait, "webhook-wait", 60*time.Second, "how long to wait at the end for the webhooks of acknowledged creates")
	flag.BoolVar(&c.sabotage, "sabotage", false, "drop lead_create_requests after the migration, as a migration that breaks the previous release would: the run must fail")
	flag.BoolVar(&c.reupgrade, "reupgrade", true, "after the rollback, upgrade again (phases reupgrade and new-again)")
	flag.BoolVar(&c.keep, "keep", false, "keep the directory of logs even when the run passes")
	flag.Parse()

	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	began := time.Now()
	root, err := repoRoot(ctx)
	if err != nil {
		return err
	}
	if c.previous == "" {
		c.previous = filepath.Join(root, release.File)
	}
	prev, err := release.Read(c.previous)
	if err != nil {
		return err
	}
	newBin, err := filepath.Abs(c.bin)
	if err != nil {
		return fmt.Errorf("find current build: %w", err)
	}
	if _, err := os.Stat(newBin); err != nil {
		return fmt.Errorf("find current build: %w (run `make build`)", err)
	}
	dir, err := os.MkdirTemp("", "partnerupgrade-")
	if err != nil {
		return fmt.Errorf("make directory: %w", err)
	}
	// PostgreSQL runs as another user when this is root: it must reach
	// its data directory inside this one.
	_ = os.Chmod(dir, 0o755)
	defer func() {
		if c.keep || err != nil {
			fmt.Println("logs of the replicas and the migration, and the database, kept in", dir)
			return
		}
		_ = os.RemoveAll(dir)
	}()

	oldBin := c.prevBin
	if oldBin == "" {
		fmt.Printf("building the previous release %s (%s) in a git worktree …\n", prev.Version, prev.Commit)
		start := time.Now()
		if oldBin, err = buildPrevious(ctx, root, prev, dir); err != nil {
			return err
		}
		fmt.Printf("  built in %v\n", time.Since(start).Round(time.Second))
	} else if oldBin, err = filepath.Abs(oldBin); err != nil {
		return fmt.Errorf("find previous build: %w", err)
	}
	fmt.Println("  previous:", binVersion(ctx, oldBin))
	fmt.Println("  current: ", binVersion(ctx, newBin))

	u, err := newUpgrade(ctx, c, dir, oldBin, newBin)
	if u != nil {
		defer u.close()
	}
	if err != nil {
		return err
	}
	failed := u.run(ctx)
	fmt.Printf("\nwhole run: %v (builds included)\n", time.Since(began).Round(time.Second))
	if ctx.Err() != nil {
		return fmt.Errorf("interrupted: %w", ctx.Err())
	}
	if failed {
		return errors.New("the upgrade or the rollback broke a promise (see above)")
	}
	fmt.Println("PASS")
	return nil
}
