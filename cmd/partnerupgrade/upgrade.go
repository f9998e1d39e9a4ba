package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/svat/partnerapi/db/pgserver"
)

// upgrade is one run: the database, the receiver, the replicas started so
// far, the load, and the promises found broken on the way.
type upgrade struct {
	c              config
	dir            string
	oldBin, newBin string

	pg       *pgserver.Server
	hooks    *receiver
	st       *stats
	rot      *rotation
	load     *load
	replicas []*replica
	phase    atomic.Pointer[string]
	broken   []string // what a phase found broken: a replica that did not start or stop cleanly, a failed migration
	reported map[*replica]bool
}

// newUpgrade starts PostgreSQL (empty), the receiver and the previous
// release's first replica, which migrates the empty database, and makes
// the partner's fixtures through it.
func newUpgrade(ctx context.Context, c config, dir, oldBin, newBin string) (*upgrade, error) {
	u := &upgrade{c: c, dir: dir, oldBin: oldBin, newBin: newBin, st: newStats(), rot: &rotation{}, reported: map[*replica]bool{}}
	u.setPhase("setup")
	fmt.Println("starting PostgreSQL; the replicas connect as the role partnerapi, which owns the database and is no superuser …")
	pg, err := pgserver.Start(ctx, pgserver.Options{DataDir: filepath.Join(dir, "pg"), Role: "partnerapi"})
	if err != nil {
		return u, fmt.Errorf("start postgresql: %w", err)
	}
	u.pg = pg
	u.hooks = newReceiver(func(ok bool, detail string) {
		if ok {
			u.st.ok(u.phaseName(), "webhook")
			return
		}
		u.st.fail(failure{at: time.Now(), phase: u.phaseName(), kind: "webhook", replica: "-", detail: detail})
	})
	r, err := u.startReplica(ctx, "old")
	if err != nil {
		return u, err
	}
	tn, err := fixtures(ctx, r, u.hooks)
	if err != nil {
		return u, fmt.Errorf("make fixtures: %w", err)
	}
	u.load = newLoad(u.rot, tn, u.st, u.phaseName)
	return u, nil
}

func (u *upgrade) setPhase(p string) { u.phase.Store(&p) }

func (u *upgrade) phaseName() string { return *u.phase.Load() }

// step is one phase: what it does first, then the load runs on for the
// phase's length.
type step struct {
	name, what string
	act        func(ctx context.Context) error
}

func (u *upgrade) steps() []step {
	start := func(release string) func(ctx context.Context) error {
		return func(ctx context.Context) error { _, err := u.startReplica(ctx, release); return err }
	}
	stop := func(release string) func(ctx context.Context) error {
		return func(ctx context.Context) error { return u.stopReplica(ctx, release) }
	}
	steps := []step{
		{"old", "the previous release alone, on the database it migrated from empty", nil},
		{"migrate", "the current build's `partnerapi migrate` while the previous release serves", u.migrate},
		{"old+new", "a replica of the current build beside the previous release", start("new")},
		{"new", "the previous release stopped (SIGTERM): the current build alone", stop("old")},
		{"rollback", "the previous release started again on the migrated database, beside the current build", start("old")},
		{"old-again", "the current build stopped: the previous release alone on the migrated database", stop("new")},
	}
	if u.c.reupgrade {
		steps = append(steps,
			step{"reupgrade", "the current build started again beside the previous release", start("new")},
			step{"new-again", "the previous release stopped: the current build alone", stop("old")},
			step{"sealed", "`partnerapi migrate --seal-webhook-secrets`: no plaintext copy of a webhook secret kept for the previous release", u.seal})
	}
	return steps
}

// run runs the phases under load, then the checks, and prints the
// report; it returns whether a promise was broken.
func (u *upgrade) run(ctx context.Context) (failed bool) {
	stopLoad := u.load.start(u.c.workers, u.c.rate)
	for _, s := range u.steps() {
		u.setPhase(s.name)
		fmt.Printf("phase %-9s %s\n", s.name, s.what)
		if s.act != nil {
			if err := s.act(ctx); err != nil {
				u.breaks(s.name, err.Error())
				fmt.Printf("  FAILED: %v\n  (the load stops here)\n", err)
				break
			}
		}
		fmt.Printf("  load on %s for %v\n", u.rot, u.c.phase)
		select {
		case <-ctx.Done():
		case <-time.After(u.c.phase):
		}
		u.watch(s.name)
		if ctx.Err() != nil {
			break
		}
	}
	stopLoad()
	u.setPhase("checks")
	checks := u.verify(ctx)
	u.shutdown(ctx)
	return u.report(append(checks, u.replicasCheck()))
}

// env is the whole environment of a replica or of the migration: of this
// process's, only what finds programs and tunes the Go runtime (it may
// hold an admin token or a database URL of its own), then the settings of
// the test. The rate limits are off and one workspace may use the whole
// pool (it is the only one), so that no 429 is the load's own doing;
// webhooks may reach the receiver on loopback, with short timeouts and
// retries so that the run waits for them briefly.
func (u *upgrade) env() []string {
	var env []string
	for _, k := range []string{"PATH", "HOME", "TMPDIR", "GOGC", "GOMEMLIMIT", "GOMAXPROCS", "GODEBUG", "GOTRACEBACK"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return append(env,
		"DATABASE_URL="+u.pg.URL,
		"PARTNER_SECRET_KEY="+secretKey,
		"PARTNER_ADMIN_TOKEN=",
		"PARTNER_PUBLIC_URL=http://upgrade.test",
		"PARTNER_SHUTDOWN_DELAY=0s", "PARTNER_SHUTDOWN_TIMEOUT=10s",
		"PARTNER_RATE_READ=0", "PARTNER_RATE_WRITE=0",
		"PARTNER_DB_MAX_CONNS=8", "PARTNER_DB_TENANT_CONNS=8",
		"PARTNER_WEBHOOK_ALLOWED_NETWORKS=127.0.0.0/8",
		"PARTNER_WEBHOOK_TIMEOUT=2s", "PARTNER_WEBHOOK_RETRY_SCHEDULE=1s,2s,5s,10s,30s",
	)
}

// breaks records a promise the phase found broken.
func (u *upgrade) breaks(phase, what string) {
	u.broken = append(u.broken, phase+": "+what)
}

// watch reports a replica that exited by itself during the phase.
func (u *upgrade) watch(phase string) {
	for _, r := range u.replicas {
		if msg := r.unexpectedExit(); msg != "" && !u.reported[r] {
			u.reported[r] = true
			u.breaks(phase, msg+"\n"+tailFile(r.log, 8))
		}
	}
}

// close ends whatever is still running, failed run or not.
func (u *upgrade) close() {
	for _, r := range u.replicas {
		r.kill()
	}
	if u.hooks != nil {
		u.hooks.close()
	}
	if u.pg != nil {
		_ = u.pg.Stop(context.Background())
	}
}
